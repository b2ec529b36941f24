"""Images: the base image and task images, built with a task container's limits."""
