"""What every stage uses: errors, files, progress, the route and target tables, the XLA runtime."""
