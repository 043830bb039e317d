"""The content-addressed lowering cache: key, local store, remote REAPI store, cached lowering."""
