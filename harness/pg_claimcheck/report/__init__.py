"""Rendering results: the table, the JSON document and its schema, and the self-contained HTML report."""
