"""Files in and out: which files a run reads (discovery, excludes), how they are read and
written without loss (atomic writes, ownership, the dirty-tree guard) and their diffs."""
