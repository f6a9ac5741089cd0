from .merge import merge, total_length

__all__ = ['merge', 'total_length']
__version__ = "2.1.1"
