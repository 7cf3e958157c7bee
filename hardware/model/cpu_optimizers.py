"""LAMB and LARS for compile-only graph extraction on MindSpore's CPU backend (extraction child only).

MindSpore 2.10's CPU backend has no kernel for the `Lamb` primitive (`nn.Lamb`'s per-parameter
update) nor for `LARSUpdate` (`nn.LARS`'s trust ratio): a step using them fails kernel selection.
MindSpore's own optimizer cells are still built as usual (their states, hyper-parameters, weight-decay
flags and `hyper_map` over the parameters); only the per-parameter function they map, the
module-level `MultitypeFuncGraph` (`mindspore.nn.optim.lamb._lamb_opt`, `...lars._lars_opt`), is
replaced by the same update written with primitives the CPU backend compiles, term by term as the
primitives' documentation states it:

- Lamb (You et al., "Large Batch Optimization for Deep Learning: Training BERT in 76 minutes", 2019,
  Algorithm 2, as `mindspore.ops.operations._inner_ops.Lamb` documents it): m, v moments, bias
  correction by the global step, r = m̂ / (√v̂ + ε) + λw, trust ratio ‖w‖/‖r‖ (1 where a norm is 0),
  w -= lr · trust · r; the moments and the weight are assigned in place, as the primitive does.
- LARSUpdate (You et al., "Large Batch Training of Convolutional Networks", 2017, as
  `mindspore.ops.LARSUpdate` documents it): trust = hyperpara·‖w‖/(‖g‖ + λ‖w‖ + ε) (1 where a norm
  is 0), g' = trust · (g + λw); the wrapped Momentum applies g'.

The memory model counts the states of both (hardware/model/memory.py OPTIMIZER_STATES). Kernels that
Ascend fuses (its LambApplyOptimizerAssign / LambApplyWeightAssign) appear here as elementwise chains.
"""

from __future__ import annotations

from typing import Any

PATCHED_OPTIMIZERS = ("lamb", "lars")


def lamb_update_function() -> Any:
    """A `MultitypeFuncGraph` with `_lamb_opt`'s signature, on CPU primitives."""
    import mindspore as ms
    from mindspore import ops
    from mindspore.ops import composite as C

    lamb_opt = C.MultitypeFuncGraph("lamb_opt_cpu")

    def norm(x: Any) -> Any:
        return ops.sqrt(ops.reduce_sum(ops.square(x)))

    @lamb_opt.register("Tensor", "Tensor", "Tensor", "Tensor", "Tensor", "Tensor", "Tensor", "Tensor", "Tensor",
                       "Tensor", "Bool", "Bool")
    def update(beta1, beta2, eps, global_step, lr, weight_decay, param, m, v, gradient, decay_flag, optim_filter):
        if optim_filter:
            step = ops.cast(global_step, ms.float32)
            gradient_f = ops.cast(gradient, ms.float32)
            param_f = ops.cast(param, ms.float32)
            next_m = beta1 * m + (1.0 - beta1) * gradient_f
            next_v = beta2 * v + (1.0 - beta2) * ops.square(gradient_f)
            m_hat = next_m / (1.0 - ops.pow(beta1, step))
            v_hat = next_v / (1.0 - ops.pow(beta2, step))
            update_ = m_hat / (ops.sqrt(v_hat) + eps)
            if decay_flag:
                update_ = update_ + weight_decay * param_f
            w_norm, u_norm = norm(param_f), norm(update_)
            trust = ops.select(ops.logical_and(w_norm > 0.0, u_norm > 0.0), w_norm / u_norm, ops.ones_like(w_norm))
            next_param = param_f - lr * trust * update_
            ops.assign(m, next_m)
            ops.assign(v, next_v)
            return ops.assign(param, ops.cast(next_param, ops.dtype(param)))
        return gradient

    return lamb_opt


def lars_update_function(epsilon: float, hyperpara: float) -> Any:
    """A `MultitypeFuncGraph` with `_lars_opt`'s signature, on CPU primitives (the LARS cell's constants)."""
    from mindspore import ops
    from mindspore.ops import composite as C

    lars_opt = C.MultitypeFuncGraph("lars_opt_cpu")

    @lars_opt.register("Function", "Number", "Tensor", "Tensor", "Tensor", "Tensor", "Bool", "Bool")
    def update(lars, loss_scale, learning_rate, weight_decay, gradient, weight, decay_flag, lars_flag):
        if lars_flag:
            w_square_sum, g_square_sum = ops.SquareSumAll()(weight, gradient)
            w_norm, g_norm = ops.sqrt(w_square_sum), ops.sqrt(g_square_sum)
            decay = weight_decay / loss_scale if decay_flag else weight_decay * 0.0
            ratio = hyperpara * w_norm / (g_norm + decay * w_norm + epsilon)
            trust = ops.select(ops.logical_and(w_norm > 0.0, g_norm > 0.0), ratio, ops.ones_like(ratio))
            return trust * (gradient + decay * weight)
        return gradient

    return lars_opt


def use_cpu_compositions(optimizer: Any) -> None:
    """Before compiling a step with `optimizer` (a built `nn.Lamb` or `nn.LARS`) on the CPU backend."""
    import mindspore.nn.optim.lamb as lamb_module
    import mindspore.nn.optim.lars as lars_module
    from mindspore import nn

    if isinstance(optimizer, nn.Lamb):
        lamb_module._lamb_opt = lamb_update_function()
    elif isinstance(optimizer, nn.LARS):
        attrs = optimizer.lars.attrs                 # LARSUpdate(epsilon, hyperpara, use_clip)
        if attrs["use_clip"]:
            raise NotImplementedError("LARS with use_clip has no CPU composition here")
        lars_module._lars_opt = lars_update_function(attrs["epsilon"], attrs["hyperpara"])
