"""The Metacompiler Catalog: schema, encoding, Spark storage, printing back."""
