from .slug import slugify

__all__ = ['slugify']
__version__ = "3.0.1"
