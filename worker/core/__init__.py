"""The job core: one job from payload to stored result, with no RQ and no module state."""
