from .wrap import fill, wrap

__all__ = ['fill', 'wrap']
__version__ = "1.4.1"
