"""The SQL file contract: reading strategy files, their parameter dialect, and what a claim's rows say."""
