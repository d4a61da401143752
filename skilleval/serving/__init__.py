"""Model servers: identity checks, the sglang launcher, GPU leases and the GPU probe."""
