"""What the two vLLM engines (rollout generation, teacher scoring) share: vLLM's limits on the
requests we send it, and the mapping of its exceptions to ours. Imports no vLLM at module level.

Written and checked against vLLM 0.33 (the ``gpu`` extra pins the range; docs/vllm.md).
"""
