"""diffusion_classes (work in progress)."""
