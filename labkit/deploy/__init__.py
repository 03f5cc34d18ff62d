"""Beyond one laptop: exported per-host programs, Kubernetes manifests, network namespaces as hosts."""
