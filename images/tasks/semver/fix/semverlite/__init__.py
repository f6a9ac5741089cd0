from .version import compare, parse

__all__ = ['compare', 'parse']
__version__ = "1.2.1"
