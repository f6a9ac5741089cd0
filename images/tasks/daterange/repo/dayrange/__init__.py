from .parse import parse_range

__all__ = ['parse_range']
__version__ = "0.7.0"
