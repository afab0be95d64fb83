"""The key/value cache: what a decoder layer keeps of the tokens it has already read.

When a model generates text one token at a time, the keys and values of the earlier tokens never
change, so `MultiHeadAttention.forward` with ``cache=`` computes them once, keeps them here, and
each new token only adds its own. Queries are not kept: a past query is never used again.
"""

from __future__ import annotations

import threading

import numpy as np

__all__ = ["KVCache"]


class KVCache:
    r"""The keys and values one attention layer has computed so far, grown in place.

    Create an empty cache and pass it to `MultiHeadAttention.forward` as ``cache=``: each call
    appends the keys and values of the tokens it was given, and lets those tokens attend to
    everything cached before them plus themselves (the causal rule). One cache per layer.

    Attributes
    ----------
    keys : ndarray of shape ``(..., kv_heads, len(cache), d_k)``
        The cached keys (a read-only view; with ``rope=True``, already rotated).
    values : ndarray of shape ``(..., kv_heads, len(cache), d_v)``
        The cached values (a read-only view).
    nbytes : int
        The bytes of the cached keys and values: ``2 * len(cache) * kv_heads * d * itemsize``
        (times the batch size) for ``d_k = d_v = d``. The arrays behind them may have room for
        up to twice as many tokens, so that appending one token rarely copies the cache.

    Notes
    -----
    For a model with $L$ layers, $h_{kv}$ key/value heads of size $d_\text{head}$ and $n$
    cached tokens, the caches of all layers hold

    $$
    2 \cdot L \cdot n \cdot h_{kv} \cdot d_\text{head} \cdot \text{bytes per number}
    $$

    which is why multi-query and grouped-query attention (``kv_heads`` below ``h`` in
    `MultiHeadAttention`) make it smaller.

    The cache is tied to the layout of the tokens it holds (batch shape, ``kv_heads``, ``d_k``,
    ``d_v``, dtype): while it holds any, a call with another layout raises ``ValueError``. It
    keeps keys and values, not weights: if a layer's weights are changed, the tokens already
    cached keep the keys and values the old weights gave them (start a new cache to recompute
    them).

    One cache holds one sequence. Calls that share a cache from several threads run one at a
    time (the cache holds a lock for the whole call), so each call appends its tokens after
    those of the calls that finished before it, and a call that fails takes back only its own
    tokens; which thread's tokens come first is up to the scheduler, so give each sequence, and
    each thread generating one, its own cache. ``copy.copy`` and ``copy.deepcopy`` give an
    independent fork: both can then be extended without touching the other (to try several
    continuations of one prompt). A pickled cache holds the cached tokens and nothing more, and
    unpickles into a working cache.

    Examples
    --------
    >>> import numpy as np
    >>> from mha import KVCache, MultiHeadAttention, causal_mask
    >>> layer = MultiHeadAttention(d_model=16, h=4, kv_heads=2, seed=0)
    >>> x = np.random.default_rng(0).normal(size=(5, 16))
    >>> cache = KVCache()
    >>> steps = [layer(x[t:t + 1], cache=cache) for t in range(5)]   # one token at a time
    >>> len(cache), cache.keys.shape, cache.nbytes                    # 2 * 5 * 2 * 4 * 8 bytes
    (5, (2, 5, 4), 640)
    >>> bool(np.allclose(np.concatenate(steps), layer(x, mask=causal_mask(5))))
    True
    """

    def __init__(self):
        self._k = None          # (..., kv_heads, capacity, d_k)
        self._v = None          # (..., kv_heads, capacity, d_v)
        self._length = 0
        self._layout = None     # (batch shape, kv_heads, d_k, d_v, dtype) of the first use
        self._lock = threading.RLock()  # held by MultiHeadAttention.forward for a whole call

    # ---- copies and pickles: the cached tokens only, in arrays of their own ----

    def __getstate__(self) -> dict:
        with self._lock:
            if self._k is None:
                keys = values = None
            else:  # copies of the cached tokens: not the spare capacity, never shared
                keys, values = (np.array(a[..., :self._length, :]) for a in (self._k, self._v))
            return {"layout": self._layout, "keys": keys, "values": values}

    def __setstate__(self, state: dict) -> None:
        self.__init__()
        self._layout = state["layout"]
        if state["keys"] is not None:
            self._k, self._v = (np.require(state[name], requirements="W")  # (..., heads, n, d)
                                for name in ("keys", "values"))
            self._length = self._k.shape[-2]

    def __copy__(self) -> KVCache:
        """An independent fork (see the class's Notes): the arrays are copied, not shared."""
        fork = type(self).__new__(type(self))
        fork.__setstate__(self.__getstate__())
        return fork

    def __deepcopy__(self, memo) -> KVCache:
        memo[id(self)] = fork = self.__copy__()  # arrays, a layout, a length: nothing deeper
        return fork

    def __len__(self) -> int:
        return self._length

    def __repr__(self) -> str:
        if self._layout is None:
            return "KVCache(empty)"
        lead, kv_heads, d_k, d_v, dtype = self._layout
        return (f"KVCache({self._length} tokens, batch {lead}, kv_heads={kv_heads}, d_k={d_k}, "
                f"d_v={d_v}, {dtype}, {self.nbytes} bytes)")

    @property
    def keys(self) -> np.ndarray:
        with self._lock:  # not halfway through another thread's call
            return self._view(self._k)

    @property
    def values(self) -> np.ndarray:
        with self._lock:
            return self._view(self._v)

    @property
    def nbytes(self) -> int:
        with self._lock:
            if self._k is None:
                return 0
            return self._view(self._k).nbytes + self._view(self._v).nbytes

    def _view(self, array):
        if array is None:
            return np.empty((0, 0, 0))
        view = array[..., :self._length, :]
        view.flags.writeable = False
        return view

    def _check_layout(self, lead, kv_heads, d_k, d_v, dtype) -> None:
        """Tie the cache to a layout while it is empty; refuse another layout afterwards."""
        layout = (tuple(lead), kv_heads, d_k, d_v, np.dtype(dtype))
        if self._length == 0:  # nothing cached yet (or a first call failed): take this layout
            if layout != self._layout:
                self._layout, self._k, self._v = layout, None, None
        elif layout != self._layout:
            names = ("batch shape", "kv_heads", "d_k", "d_v", "dtype")
            differ = ", ".join(f"{name} {old} (cached) vs {new} (now)" for name, old, new
                               in zip(names, self._layout, layout) if old != new)
            raise ValueError(f"this KVCache holds {self._length} tokens of another layer or "
                             f"input layout: {differ}; use one KVCache per layer and sequence "
                             f"(or a new one)")

    def _append(self, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Append ``k`` ``(..., kv_heads, n_new, d_k)`` and ``v``; return every cached key and
        value, the new ones included (views of the cache's arrays)."""
        end = self._length + k.shape[-2]
        if self._k is None or end > self._k.shape[-2]:
            capacity = max(end, 2 * (0 if self._k is None else self._k.shape[-2]), 16)
            grown = []
            for old, new in ((self._k, k), (self._v, v)):
                array = np.empty(new.shape[:-2] + (capacity, new.shape[-1]), dtype=new.dtype)
                if old is not None:
                    array[..., :self._length, :] = old[..., :self._length, :]
                grown.append(array)
            self._k, self._v = grown
        self._k[..., self._length:end, :] = k
        self._v[..., self._length:end, :] = v
        self._length = end
        return self._k[..., :end, :], self._v[..., :end, :]

    def _truncate(self, length: int) -> None:
        """Forget the tokens after the first ``length`` (a call that failed takes its own back)."""
        self._length = length
