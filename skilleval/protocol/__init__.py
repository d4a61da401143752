"""A protocol's sections as typed values, below every layer that reads them."""
