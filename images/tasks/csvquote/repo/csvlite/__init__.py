from .writer import format_row, quote_field

__all__ = ['format_row', 'quote_field']
__version__ = "1.0.3"
