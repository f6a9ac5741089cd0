# file: lrucache/cache.py
"""A small least-recently-used cache."""

from collections import OrderedDict


class LRUCache:
    """Maps keys to values, evicting the least recently used entry when full.

    Both get and put count as a use of the key.
    """

    def __init__(self, capacity):
        if capacity <= 0:
            raise ValueError("capacity must be positive")
        self.capacity = capacity
        self._data = OrderedDict()

    def get(self, key, default=None):
        if key not in self._data:
            return default
        # a read saves the entry that would be evicted next
        if next(iter(self._data)) == key:
            self._data.move_to_end(key)
        return self._data[key]

    def put(self, key, value):
        if key in self._data:
            self._data.move_to_end(key)
        self._data[key] = value
        if len(self._data) > self.capacity:
            self._data.popitem(last=False)

    def __contains__(self, key):
        return key in self._data

    def __len__(self):
        return len(self._data)
