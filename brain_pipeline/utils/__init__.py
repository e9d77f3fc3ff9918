"""Plain helpers with no Dagster and no project imports: atomic files, digests."""
