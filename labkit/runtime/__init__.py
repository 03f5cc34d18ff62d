"""Process plumbing: TF_CONFIG, starting and stopping task processes, the task server, TensorFlow's runtime."""
