"""A LLaMA decoder written as MaxText writes it (Flax linen, the decoder layers under nn.scan, MaxText's module names), and as Flax NNX writes it (nnx.scan), for the loop tests: structure only, random weights."""
from __future__ import annotations


def _rotary(x, positions):
    """LLaMA's rotary embedding of x [batch, seq, heads, head_dim] at float positions [batch, seq]."""
    import jax.numpy as jnp

    half = x.shape[-1] // 2
    freq = 1.0 / (500000.0 ** (jnp.arange(half) / half))
    angle = positions[:, :, None, None] * freq
    sin, cos = jnp.sin(angle), jnp.cos(angle)
    a, b = x[..., :half], x[..., half:]
    return jnp.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def _attend(q, k, v):
    """Causal grouped-query attention of q [batch, seq, heads, head_dim] over k and v [batch, seq,
    kv_heads, head_dim]: the context, [batch, seq, heads, head_dim]."""
    import jax
    import jax.numpy as jnp

    seq, heads, head_dim, kv_heads = q.shape[1], q.shape[2], q.shape[3], k.shape[2]
    k, v = jnp.repeat(k, heads // kv_heads, axis=2), jnp.repeat(v, heads // kv_heads, axis=2)
    scores = jnp.einsum("bthd,bshd->bhts", q, k) / jnp.sqrt(head_dim)
    scores = jnp.where(jnp.tril(jnp.ones((seq, seq), bool)), scores, -1e9)
    return jnp.einsum("bhts,bshd->bthd", jax.nn.softmax(scores, axis=-1), v)


def lowered_text(layers: int = 2, hidden: int = 64, heads: int = 4, kv_heads: int = 2, mlp: int = 128,
                 vocab: int = 512, batch: int = 2, seq: int = 16, scan: bool = True, coarse: bool = False) -> str:
    """The StableHLO (with locations) of the model's forward pass on token ids [batch, seq]; `coarse`:
    each layer computes its norms, attention and MLP inline (its scopes stop at the layer)."""
    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    head_dim = hidden // heads

    class RMSNorm(nn.Module):
        @nn.compact
        def __call__(self, x):
            scale = self.param("scale", nn.initializers.ones, (x.shape[-1],))
            return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5) * scale

    class Attention(nn.Module):
        @nn.compact
        def __call__(self, x, positions):
            dense = lambda n, name: nn.DenseGeneral((n, head_dim), use_bias=False, name=name)  # noqa: E731
            q, k, v = dense(heads, "query")(x), dense(kv_heads, "key")(x), dense(kv_heads, "value")(x)
            q, k = _rotary(q, positions), _rotary(k, positions)
            out = _attend(q, k, v)
            return nn.DenseGeneral(hidden, axis=(-2, -1), use_bias=False, name="out")(out)

    class MLP(nn.Module):
        @nn.compact
        def __call__(self, x):
            gate = nn.Dense(mlp, use_bias=False, name="wi_0")(x)
            up = nn.Dense(mlp, use_bias=False, name="wi_1")(x)
            return nn.Dense(hidden, use_bias=False, name="wo")(jax.nn.silu(gate) * up)

    class DecoderLayer(nn.Module):
        @nn.compact
        def __call__(self, x, positions):
            if coarse:  # one scope for the whole layer: its parameters, and no submodule
                w = lambda name, *shape: self.param(name, nn.initializers.normal(0.02), shape)  # noqa: E731
                norm = lambda y: y * jax.lax.rsqrt(jnp.mean(y * y, axis=-1, keepdims=True) + 1e-5)  # noqa: E731
                h = norm(x)
                q = _rotary((h @ w("wq", hidden, heads * head_dim)).reshape(batch, seq, heads, head_dim), positions)
                k = _rotary((h @ w("wk", hidden, kv_heads * head_dim)).reshape(batch, seq, kv_heads, head_dim),
                           positions)
                v = (h @ w("wv", hidden, kv_heads * head_dim)).reshape(batch, seq, kv_heads, head_dim)
                out = _attend(q, k, v).reshape(batch, seq, hidden)
                x = x + out @ w("wo", hidden, hidden)
                h = norm(x)
                return x + (jax.nn.silu(h @ w("w1", hidden, mlp)) * (h @ w("w3", hidden, mlp))) @ w("w2", mlp, hidden), \
                    None
            x = x + Attention(name="self_attention")(RMSNorm(name="pre_self_attention_layer_norm")(x), positions)
            x = x + MLP(name="mlp")(RMSNorm(name="post_self_attention_layer_norm")(x))
            return x, None

    class Decoder(nn.Module):
        @nn.compact
        def __call__(self, ids):
            x = nn.Embed(vocab, hidden, name="token_embedder")(ids)
            positions = jnp.broadcast_to(jnp.arange(seq)[None], ids.shape).astype(jnp.float32)
            if scan:
                stack = nn.scan(DecoderLayer, variable_axes={"params": 0}, split_rngs={"params": True},
                                in_axes=(nn.broadcast,), length=layers)
                x, _ = stack(name="layers")(x, positions)
            else:
                for i in range(layers):
                    x, _ = DecoderLayer(name=f"layers_{i}")(x, positions)
            return RMSNorm(name="decoder_norm")(x)

    model = Decoder()
    ids = jnp.zeros((batch, seq), jnp.int32)
    params = model.init(jax.random.PRNGKey(0), ids)
    return jax.jit(model.apply).lower(params, ids).compiler_ir("stablehlo").operation.get_asm(enable_debug_info=True)


def nnx_lowered_text(layers: int = 2, hidden: int = 64, heads: int = 4, kv_heads: int = 2, mlp: int = 128,
                     vocab: int = 512, batch: int = 2, seq: int = 16, scan: bool = True) -> str:
    """The same decoder in Flax NNX, its layers made with nnx.vmap and run with nnx.scan (the Flax
    docs' scan-over-layers pattern), unrolled with `scan=False`. NNX names no scope: the StableHLO
    locations carry primitives, einsum specs and the loop's own `while/body`, no module path."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    head_dim = hidden // heads

    class RMSNorm(nnx.Module):
        def __init__(self, rngs):
            self.scale = nnx.Param(jnp.ones((hidden,)))

        def __call__(self, x):
            return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5) * self.scale

    class Attention(nnx.Module):
        def __init__(self, rngs):
            self.q = nnx.Linear(hidden, heads * head_dim, use_bias=False, rngs=rngs)
            self.k = nnx.Linear(hidden, kv_heads * head_dim, use_bias=False, rngs=rngs)
            self.v = nnx.Linear(hidden, kv_heads * head_dim, use_bias=False, rngs=rngs)
            self.o = nnx.Linear(hidden, hidden, use_bias=False, rngs=rngs)

        def __call__(self, x, positions):
            q = _rotary(self.q(x).reshape(batch, seq, heads, head_dim), positions)
            k = _rotary(self.k(x).reshape(batch, seq, kv_heads, head_dim), positions)
            v = self.v(x).reshape(batch, seq, kv_heads, head_dim)
            out = _attend(q, k, v).reshape(batch, seq, hidden)
            return self.o(out)

    class MLP(nnx.Module):
        def __init__(self, rngs):
            self.gate = nnx.Linear(hidden, mlp, use_bias=False, rngs=rngs)
            self.up = nnx.Linear(hidden, mlp, use_bias=False, rngs=rngs)
            self.down = nnx.Linear(mlp, hidden, use_bias=False, rngs=rngs)

        def __call__(self, x):
            return self.down(jax.nn.silu(self.gate(x)) * self.up(x))

    class Block(nnx.Module):
        def __init__(self, rngs):
            self.ln1, self.attn, self.ln2, self.mlp = RMSNorm(rngs), Attention(rngs), RMSNorm(rngs), MLP(rngs)

        def __call__(self, x, positions):
            x = x + self.attn(self.ln1(x), positions)
            return x + self.mlp(self.ln2(x))

    class Model(nnx.Module):
        def __init__(self, rngs):
            self.embed = nnx.Embed(vocab, hidden, rngs=rngs)
            if scan:
                @nnx.split_rngs(splits=layers)
                @nnx.vmap(in_axes=(0,), out_axes=0)
                def make(rngs):
                    return Block(rngs)

                self.layers = make(rngs)
            else:
                self.layers = nnx.List([Block(rngs) for _ in range(layers)])
            self.norm = RMSNorm(rngs)

        def __call__(self, ids):
            x = self.embed(ids)
            positions = jnp.broadcast_to(jnp.arange(seq)[None], ids.shape).astype(jnp.float32)
            if scan:
                @nnx.scan(in_axes=(nnx.Carry, 0, None), out_axes=nnx.Carry)
                def body(x, layer, positions):
                    return layer(x, positions)

                x = body(x, self.layers, positions)
            else:
                for layer in self.layers:
                    x = layer(x, positions)
            return self.norm(x)

    model = Model(nnx.Rngs(0))
    graphdef, state = nnx.split(model)

    def apply(state, ids):
        return nnx.merge(graphdef, state)(ids)

    ids = jnp.zeros((batch, seq), jnp.int32)
    return jax.jit(apply).lower(state, ids).compiler_ir("stablehlo").operation.get_asm(enable_debug_info=True)
