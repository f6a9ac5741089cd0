# file: lrucache/cache.py
"""A small least-recently-used cache."""


class LRUCache:
    """Maps keys to values, evicting the least recently used entry when full.

    Both get and put count as a use of the key.
    """

    def __init__(self, capacity):
        if capacity <= 0:
            raise ValueError("capacity must be positive")
        self.capacity = capacity
        self._data = {}
        self._order = []  # least recently used first

    def _touch(self, key):
        if key in self._order:
            self._order.remove(key)
        self._order.append(key)

    def get(self, key, default=None):
        if key not in self._data:
            return default
        self._touch(key)
        return self._data[key]

    def put(self, key, value):
        self._data[key] = value
        self._touch(key)
        while len(self._order) > self.capacity:
            del self._data[self._order.pop(0)]

    def __contains__(self, key):
        return key in self._data

    def __len__(self):
        return len(self._data)
