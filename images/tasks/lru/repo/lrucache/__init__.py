from .cache import LRUCache

__all__ = ['LRUCache']
__version__ = "0.4.0"
