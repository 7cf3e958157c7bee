"""LLM-scale training on the device model: one extracted decoder block composed into a parallel step.

shape.py (the sizes and the parallel layout), memory.py (Korthikanti et al. 2022 activations and
ZeRO-style model states per device), comm.py (tensor/pipeline/data-parallel collectives on the
profile's topology), compose.py (the 1F1B step from per-block costs), flash.py (flash_attention:
the block's attention core as Ascend's fused FlashAttentionScore kernels). Pure functions, no MindSpore.
"""
