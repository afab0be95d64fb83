"""The tiny trainer (mha.site.training): its hand-written gradients equal finite differences, a few
steps lower the loss, re-training reproduces the kept run's first steps, the tasks' generators
have the properties the chapter claims, the head scores are right on hand-made maps, and the kept
run and its figures and tables have the structure the chapter reads."""

import re

import numpy as np
import pytest

from helpers import weights_sum_error
from mha.site import training as T
from tolerance import assert_ulp_close, assert_within, ulps

pytestmark = pytest.mark.site  # the site's experiments and plots (matplotlib), not the core

FIGURE_NAMES = ("training-induction-curves", "training-induction-maps", "training-heads",
                "training-scale-init", "training-scale-curves")
TABLE_NAMES = ("training-head-scores", "training-heads-table", "training-scale-table")


@pytest.fixture(scope="module")
def run():
    return T.kept_run()


# ---- gradients --------------------------------------------------------------------------------

def _loss(model, tokens, targets):
    return T.cross_entropy(model.forward(tokens)[0], targets)[0]


@pytest.mark.parametrize("last_only, rope", [(False, False), (True, False), (False, True)])
def test_whole_model_gradient_equals_finite_differences(last_only, rope):
    rng = np.random.default_rng(3)
    model = T.Model(vocab=5, n=4, d_model=4, h=2, layers=2, readouts=2, last_only=last_only,
                    seed=1, rope=rope)
    for layer in model.layers:  # larger weights than Glorot's: gradients well away from zero
        for w in ("W_Q", "W_K", "W_V", "W_O"):
            getattr(layer, w)[...] *= 3.0
    tokens = rng.integers(0, 5, size=(3, 4))
    tokens[0, :2] = 2                                   # a token used twice: dE sums both uses
    targets = rng.integers(0, 5, size=(2, 3, 1 if last_only else 4))
    if not last_only:
        targets[1, 0, 2] = -1                           # a position without a target
    loss, grads = model.loss_and_grads(tokens, targets)
    assert loss == pytest.approx(_loss(model, tokens, targets), rel=0, abs=0)
    params = model.parameters()
    assert set(grads) == set(params) and ("P" in params) != rope
    eps = 1e-6
    for name, p in params.items():
        assert grads[name].shape == p.shape
        numeric = np.zeros_like(p)
        for i in np.ndindex(p.shape):
            old = p[i]
            p[i] = old + eps
            up = _loss(model, tokens, targets)
            p[i] = old - eps
            down = _loss(model, tokens, targets)
            p[i] = old
            numeric[i] = (up - down) / (2 * eps)
        # A central difference errs by the loss's rounding over eps (a float64 chain: 8 ulp of
        # the loss; measured 1.3) and by its truncation eps^2 |f^(3)| / 6 (rtol: 1e-5 of the
        # gradient, so |f^(3)| up to 6e7 |f'|; measured within a tenth of these tolerances)
        np.testing.assert_allclose(grads[name], numeric, rtol=1e-5, atol=ulps(loss, n=8) / eps,
                                   err_msg=name)
        assert np.abs(numeric).max() > 1e-4, name       # the check compared something


def test_cross_entropy_is_the_mean_negative_log_probability_and_ignores_minus_one():
    logits = np.array([[[0.0, np.log(3.0)], [5.0, 5.0]], [[1000.0, 0.0], [0.0, 0.0]]])
    targets = np.array([[0, -1], [1, 1]])               # (2, 2); one position without target
    loss, d = T.cross_entropy(logits, targets)
    expected = (np.log(4.0) + 1000.0 + np.log(2.0)) / 3  # -log(1/4), -log(e^-1000), -log(1/2)
    assert loss == pytest.approx(expected, rel=1e-12)    # finite even where p underflows to 0
    np.testing.assert_array_equal(d[0, 1], 0.0)
    # rule 1: the softmax of (0, log 3) carries log(3)'s rounding, exp's 4 ulp, the sum's and
    # the division's; minus the target and over 3: within 8 ulp of 1, over 3
    assert_ulp_close(d[0, 0], (np.array([0.25, 0.75]) - [1, 0]) / 3, magnitude=1 / 3, n=8)


def test_adam_first_step_moves_each_weight_by_the_learning_rate_against_its_gradient_sign():
    p = {"w": np.array([1.0, -2.0, 0.5])}
    opt = T.Adam(p, lr=0.1)
    opt.step({"w": np.array([3.0, -1e-3, 0.0])})
    # m_hat = g, v_hat = g^2 after one step: the move is lr * g / (|g| + eps). Rule 1: m_hat
    # within 1 ulp of g, v_hat within 2 of g^2, the square root, the sum, the division and
    # lr add up to 8 ulp of the move (at most lr); the subtraction half an ulp of the weight,
    # and so does the expected value's own rounding
    g = np.array([3.0, -1e-3, 0.0])
    expected = np.array([1.0, -2.0, 0.5]) - 0.1 * g / (np.abs(g) + opt.eps)
    assert_within(p["w"], expected, ulps(0.1, n=8) + ulps(expected, n=1))
    assert np.abs(p["w"] - [0.9, -1.9, 0.5]).max() <= 0.1 * 1e-8 / 1e-3   # Adam's eps alone


def test_adam_lr_factors_scale_the_step_of_the_parameters_they_name():
    p = {"a": np.array([1.0, -1.0]), "b": np.array([1.0, -1.0])}
    opt = T.Adam(p, lr=0.1, lr_factors={"b": 0.125})
    g = np.array([2.0, -3.0])
    opt.step({"a": g, "b": g})
    # the first step moves each weight by lr * g / (|g| + eps); 0.125 is a power of two, so the
    # two moves are exactly 8 apart before they are subtracted from weights of size 1, which
    # rounds each by half an ulp of 1 (rule 1)
    assert_within(np.array([1.0, -1.0]) - p["b"], (np.array([1.0, -1.0]) - p["a"]) * 0.125,
                  ulps(1.0, n=1))
    assert p["a"][0] < 1.0 and p["b"][0] < 1.0
    with pytest.raises(ValueError, match="W_X"):
        T.Adam(p, lr=0.1, lr_factors={"W_X": 0.5})


def test_a_few_training_steps_lower_the_loss():
    rng = np.random.default_rng(0)
    model = T.Model(vocab=8, n=8, d_model=16, h=2, layers=2, seed=0)
    tokens, targets, _, _ = T.induction_data(
        rng, 16, {**T.INDUCTION, "vocab": 8, "n": 8, "lengths": [2, 4]})
    opt = T.Adam(model.parameters(), 1e-2)
    losses = []
    for _ in range(20):
        loss, grads = model.loss_and_grads(tokens, targets)
        losses.append(loss)
        opt.step(grads)
    assert losses[-1] < 0.7 * losses[0]
    assert all(b < a for a, b in zip(losses[:5], losses[1:6]))  # falls from the first step


# ---- the kept run reproduces ------------------------------------------------------------------

def test_retraining_reproduces_the_kept_runs_first_steps(run):
    kept = next(s for s in run["heads"]["settings"] if s["h"] == 2)["runs"][0]
    again = T.pair_run(kept["seed"], 2, T.HEADS, steps=T.FIRST)
    assert len(kept["first_losses"]) == T.FIRST
    # Five float64 Adam steps of a small model, run again (here or elsewhere): measured within
    # 2.2e-16 (relative) of the kept run under three OpenBLAS kernels. Adam divides each
    # gradient by its own size, so a gradient near zero moves its weight by its rounding at
    # full size and no bound of rule 2 carries through the steps: 1e-9 is the measured
    # difference times ~5e6, still far below what a changed step would move.
    np.testing.assert_allclose(again["first_losses"], kept["first_losses"], rtol=1e-9, atol=0)
    assert again["loss"][0] == pytest.approx(kept["loss"][0], rel=1e-9)  # the eval at step 0
    control = next(s for s in run["scale"]["training"]["settings"]
                   if s["arm"] == "unscaled_slow_W_Q")
    kept = control["runs"][0]
    d_k = run["scale"]["training"]["config"]["d_k"]
    again = T.pair_run(kept["seed"], T.SCALE_TRAINING["h"], T.SCALE_TRAINING, steps=T.FIRST,
                       scale=1.0, lr_factors={"layers.0.W_Q": 1 / np.sqrt(d_k)})  # the same
    np.testing.assert_allclose(again["first_losses"], kept["first_losses"], rtol=1e-9, atol=0)
    kept = run["induction"]["runs"][0]
    again = T.induction_run(kept["seed"], T.INDUCTION, steps=T.FIRST)   # the same, 1e-9
    np.testing.assert_allclose(again["first_losses"], kept["first_losses"], rtol=1e-9, atol=0)
    for key in ("previous_token", "induction"):
        np.testing.assert_allclose(again["scores_before"][key], kept["scores_before"][key],
                                   rtol=1e-9)


def test_the_kept_run_was_made_with_the_settings_in_the_code(run):
    assert run["induction"]["config"] == T.INDUCTION
    assert run["heads"]["config"] == {k: v for k, v in T.HEADS.items() if k != "hs"}
    assert [s["h"] for s in run["heads"]["settings"]] == T.HEADS["hs"]
    assert run["scale"]["init"]["d_k"] == T.SCALE_INIT["d_k"]
    assert run["seeds"] == list(T.SEEDS)


# ---- the tasks --------------------------------------------------------------------------------

def test_induction_sequences_repeat_a_segment_of_varying_length_and_offset():
    rng = np.random.default_rng(0)
    tokens, prefix, length = T.induction_batch(rng, 400, n=16, vocab=16, lengths=(3, 8))
    assert tokens.shape == (400, 16) and (prefix + 2 * length == 16).all()
    assert set(length.tolist()) == set(range(3, 9))     # every length, so every offset, occurs
    for row, r, L in zip(tokens, prefix, length):
        np.testing.assert_array_equal(row[r + L:], row[r:r + L])  # the second copy is A
        assert len(set(row[:r + L].tolist())) == r + L            # prefix and A: distinct
    targets, repeat = T.induction_targets(tokens, prefix, length)
    assert (targets[0, :, :-1] == tokens[:, 1:]).all() and (targets[0, :, -1] == -1).all()
    np.testing.assert_array_equal(repeat.sum(axis=1), length - 1)
    # Every repeated-half target occurred exactly L - 1 places before its query.
    b, t = np.nonzero(repeat)
    np.testing.assert_array_equal(tokens[b, t + 1], tokens[b, t + 1 - length[b]])


def test_no_fixed_look_back_copies_the_repeated_half():
    """The positional shortcut: a rule "at position t, copy the token that followed position
    t - d" with one d per t (what one positional head can do) gets most targets wrong."""
    rng = np.random.default_rng(1)
    tokens, prefix, length = T.induction_batch(rng, 4000, n=16, vocab=16, lengths=(3, 8))
    targets, repeat = T.induction_targets(tokens, prefix, length)
    right = total = 0
    for t in range(15):
        rows = repeat[:, t]
        total += rows.sum()
        right += max(((tokens[rows, t + 1 - d] == targets[0, rows, t]).sum())
                     for d in range(1, t + 2))
    assert right / total < 0.45                          # the trained models reach over 0.9


def test_pair_targets_are_the_tokens_at_the_two_positions():
    tokens, targets = T.pair_batch(np.random.default_rng(0), 50, n=8, vocab=16,
                                   positions=(2, 5))
    assert targets.shape == (2, 50, 1)
    np.testing.assert_array_equal(targets[0, :, 0], tokens[:, 2])
    np.testing.assert_array_equal(targets[1, :, 0], tokens[:, 5])


def test_the_models_budget_is_the_same_for_every_number_of_heads():
    counts = {h: T.Model(16, 8, 32, h, 1, readouts=2, last_only=True).count() for h in (1, 2, 4)}
    assert len(set(counts.values())) == 1
    assert counts[1] == 16 * 32 + 8 * 32 + 4 * 32 * 32 + 2 * 32 * 16


# ---- head scores on hand-made maps ------------------------------------------------------------

def test_head_scores_on_hand_made_maps():
    n = 8
    prefix, length = np.array([2, 0]), np.array([3, 4])    # second copy at 5..7 and 4..7
    previous = np.zeros((n, n))
    previous[0, 0] = 1.0
    previous[np.arange(1, n), np.arange(n - 1)] = 1.0       # every query on t - 1
    induction = np.zeros((2, n, n))
    induction[:, np.arange(n), 0] = 1.0
    for row, (r, L) in enumerate(zip(prefix, length)):
        q = np.arange(r + L, r + 2 * L)
        induction[row, q] = 0.0
        induction[row, q, q - L + 1] = 1.0                  # on the token after the first A[i]
    uniform = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
    weights = np.stack([np.stack([previous, previous]), induction,
                        np.stack([uniform, uniform])], axis=1)  # (b=2, h=3, n, n)
    s = T.head_scores(weights, prefix, length)
    np.testing.assert_allclose(s["previous_token"][0], 1.0)
    np.testing.assert_allclose(s["induction"][1], 1.0)
    assert s["induction"][0] == 0.0                          # t - 1 is never t - L + 1 (L >= 2)
    np.testing.assert_allclose(s["previous_token"][2], np.mean(1 / np.arange(2, n + 1)))
    expected = np.mean([1 / (t + 1) for r, L in zip(prefix, length)
                        for t in range(r + L, r + 2 * L)])
    np.testing.assert_allclose(s["induction"][2], expected)


def test_roles_name_every_head_at_or_above_the_threshold():
    scores = {"previous_token": [[0.2, 0.5], [0.1, 0.49]], "induction": [[0.0, 0.1], [0.9, 0.6]]}
    assert T.roles(scores) == {"previous_token": [[0, 1]], "induction": [[1, 0], [1, 1]]}
    assert T.roles(scores, threshold=0.95) == {"previous_token": [], "induction": []}


# ---- the kept run's structure -----------------------------------------------------------------

def _check_stats(s, values):
    assert s["mean"] == pytest.approx(np.mean(values), rel=1e-12)
    assert s["std"] == pytest.approx(np.std(values, ddof=1), rel=1e-9, abs=1e-15)
    assert s["min"] == min(values) and s["max"] == max(values)


def test_the_kept_run_has_the_documented_structure(run):
    assert run["version"] == 1 and run["dtype"] == "float64"
    assert 0 < run["seconds"] <= 300                                  # the 5 minutes
    assert set(run["machine"]) == {"platform", "processor", "cpu_count"}
    assert set(run["environment"]) == {"OPENBLAS_NUM_THREADS"}
    seeds = run["seeds"]
    assert len(seeds) >= 3
    ind = run["induction"]
    layers, h = ind["config"]["layers"], ind["config"]["h"]
    assert [r["seed"] for r in ind["runs"]] == seeds
    assert ind["steps"][0] == 0 and ind["steps"][-1] == ind["config"]["steps"]
    for r in ind["runs"]:
        assert len(r["loss"]) == len(r["repeat_accuracy"]) == len(ind["steps"])
        assert len(r["first_losses"]) == T.FIRST
        for when in ("scores_before", "scores_after"):
            for key in ("previous_token", "induction"):
                assert np.shape(r[when][key]) == (layers, h)
        for key, role in (("previous_token", "previous_token_head"),
                          ("induction", "induction_head")):
            scores = np.asarray(r["scores_after"][key])
            assert scores[tuple(r[role])] == scores.max()     # named by the score
    _check_stats(ind["final"]["repeat_accuracy"], [r["repeat_accuracy"][-1] for r in ind["runs"]])
    ex = ind["example"]
    n = ind["config"]["n"]
    assert len(ex["tokens"]) == n and ex["prefix"] + 2 * ex["length"] == n
    for key in ("weights_before", "weights_after"):
        w = np.asarray(ex[key])
        assert w.shape == (layers, h, n, n)
        assert_within(w.sum(axis=-1), 1.0, weights_sum_error(n))
        assert (np.triu(w, 1) == 0).all()                              # causal
    for s in run["heads"]["settings"]:
        assert s["d_k"] * s["h"] == run["heads"]["config"]["d_model"]
        assert [r["seed"] for r in s["runs"]] == seeds
        for key in ("loss", "accuracy", "both_accuracy"):
            _check_stats(s["final"][key], [r[key][-1] for r in s["runs"]])
            assert all(len(r[key]) == len(run["heads"]["steps"]) for r in s["runs"])
    assert len({s["parameters"] for s in run["heads"]["settings"]}) == 1
    n, vocab = run["heads"]["config"]["n"], run["heads"]["config"]["vocab"]
    for s in run["heads"]["settings"]:
        for r in s["runs"]:
            w = np.asarray(r["last_row_weights"])
            assert w.shape == (s["h"], n)
            assert_within(w.sum(axis=1), 1.0, weights_sum_error(n))
            assert np.shape(r["weight_on_i_by_token"]) == (s["h"], vocab)
    init = run["scale"]["init"]
    assert init["max_entropy"] == pytest.approx(np.log(init["n"]))
    assert init["row_gain_floor"] == T.ROW_GAIN_FLOOR
    for key in ("entropy", "grad_W_Q", "grad_S", "softmax_gain", "row_gain_median",
                "rows_below", "dQ_median", "top_decile_share"):
        for kind in ("scaled", "unscaled"):
            assert len(init[key][kind]["mean"]) == len(init["d_k"])
    for key in ("query_ratio", "query_smaller"):
        assert len(init[key]["mean"]) == len(init["d_k"])
    for key in ("rows_below", "query_smaller", "top_decile_share"):       # shares
        for s in ([init[key]] if key == "query_smaller" else init[key].values()):
            assert 0 <= min(s["min"]) and max(s["max"]) <= 1
    assert max(max(init["entropy"][k]["max"]) for k in ("scaled", "unscaled")) <= init["max_entropy"]
    tr = run["scale"]["training"]
    assert [s["arm"] for s in tr["settings"]] == [arm for arm, _, _ in T.SCALE_ARMS]
    assert [s["scaled"] for s in tr["settings"]] == [True, False, False]
    assert tr["config"]["d_k"] == tr["config"]["d_model"] // tr["config"]["h"]
    lr = tr["config"]["lr"]
    assert [s["lr_W_Q"] for s in tr["settings"]] == [lr, lr, lr / np.sqrt(tr["config"]["d_k"])]
    for s in tr["settings"]:
        assert [r["seed"] for r in s["runs"]] == seeds
        for key in ("loss", "accuracy", "both_accuracy"):
            _check_stats(s["final"][key], [r[key][-1] for r in s["runs"]])
            assert all(len(r[key]) == len(tr["steps"]) for r in s["runs"])


def test_scale_init_matches_a_direct_computation_at_one_d_k():
    from mha import MultiHeadAttention

    r = T.scale_init(seeds=(0, 1), config={"n": 8, "d_k": [16], "batch": 2})
    found = {"scaled": [], "unscaled": []}
    for seed in (0, 1):
        rng = np.random.default_rng([seed, 16, 2])
        x, g = rng.normal(size=(2, 8, 16)), rng.normal(size=(2, 8, 16))
        for kind, scale in (("scaled", None), ("unscaled", 1.0)):
            layer = MultiHeadAttention(16, 1, seed=np.random.SeedSequence([seed, 16]),
                                       scale=scale)
            q = x @ layer.W_Q[:, 0]                                 # (b, n, d_k)
            k = x @ layer.W_K[:, 0]
            s = q @ k.swapaxes(-1, -2) * (0.25 if scale is None else 1.0)  # 1/sqrt(16)
            w = np.exp(s - s.max(-1, keepdims=True))
            w /= w.sum(-1, keepdims=True)
            found[kind].append(float(np.mean(-(w * np.log(w)).sum(-1))))
            # the gradient's norm is unchanged by the layer's own computation of the forward
            assert np.linalg.norm(layer.backward(x, g)["W_Q"]) > 0
    for kind in found:
        assert r["entropy"][kind]["mean"][0] == pytest.approx(np.mean(found[kind]), rel=1e-10)
    assert r["entropy"]["unscaled"]["mean"][0] < r["entropy"]["scaled"]["mean"][0]


# ---- the sqrt(d_k) measurement: per query, the equivalence, the control ------------------------

def test_scale_init_shows_the_saturation_query_by_query_while_the_sum_is_larger():
    """Measurement 3a from the code (not the kept run), at a small and the largest d_k: summed
    over the queries the unscaled gradient at W_Q is larger, yet for most queries it is smaller,
    most unscaled softmax rows pass back less than 0.1 %, and |dL/dS| (which does not depend on
    how the layer is written) is smaller too."""
    r = T.scale_init(seeds=(0, 1, 2), config={**T.SCALE_INIT, "d_k": [16, 1024]})
    small, large = 0, 1
    ratio, below, grad, grad_s = (r["query_ratio"], r["rows_below"], r["grad_W_Q"], r["grad_S"])
    # d_k = 1024: every seed's median query gets a smaller gradient without the scale (measured
    # 0.003 to 0.03 against 1), and most of its rows are saturated (measured 0.66 to 0.74)
    assert ratio["max"][large] < 0.1
    assert below["unscaled"]["min"][large] > 0.5 and below["scaled"]["max"][large] == 0.0
    assert r["query_smaller"]["min"][large] > 0.5
    assert r["row_gain_median"]["unscaled"]["max"][large] < T.ROW_GAIN_FLOOR
    # ... while the sum over the queries is larger (measured 16 to 20 times) ...
    assert grad["unscaled"]["min"][large] > 5 * grad["scaled"]["max"][large]
    # ... because a few unsaturated rows carry it (measured 0.93 to 0.95 of the squares)
    assert r["top_decile_share"]["unscaled"]["min"][large] > 0.8
    # written the scaled way (W_Q times sqrt(d_k)) the unscaled gradient is smaller, and so is
    # |dL/dS| (measured 0.5 to 0.7 of the scaled one)
    assert grad["unscaled"]["max"][large] / np.sqrt(1024) < grad["scaled"]["min"][large]
    assert grad_s["unscaled"]["max"][large] < grad_s["scaled"]["min"][large]
    # d_k = 16: no saturation yet, the typical query's gradient is larger without the scale
    assert ratio["min"][small] > 1 and below["unscaled"]["max"][small] < 0.1


def test_the_kept_scale_init_is_what_the_code_computes(run):
    """Measurement 3a is cheap (seconds): the kept numbers, every statistic, against a fresh
    run. Float64 throughout: the old statistics measured within 5e-16 (relative) of the kept
    run on the machine that made it, and 1e-9 leaves room for another kernel's summation order
    (checked under Haswell and SkylakeX) without letting a changed statistic through. The
    shares are counts over 128 rows or queries; the row gain nearest the floor 1e-3 is 0.1 %
    away from it (measured), far beyond rounding."""
    kept, fresh = run["scale"]["init"], T.scale_init()
    assert set(fresh) == set(kept)
    for key, value in fresh.items():
        if not isinstance(value, dict):
            assert value == kept[key], key
            continue
        for part in (value.values() if "scaled" in value else [value]):
            assert set(part) == {"mean", "std", "min", "max"}
        for kind in (("scaled", "unscaled") if "scaled" in value else (None,)):
            got = value[kind] if kind else value
            want = kept[key][kind] if kind else kept[key]
            for stat in ("mean", "min", "max"):
                np.testing.assert_allclose(got[stat], want[stat], rtol=1e-9, atol=0,
                                           err_msg=f"{key} {kind} {stat}")


def test_scale_init_per_query_gradients_are_the_layers_own():
    """The dQ rows scale_init measures (attention_backward on the layer's traced q, k, v, with
    d_heads = g W_O^T) are what the layer's backward uses: sum_i x_i^T dQ_i is its dW_Q."""
    from mha import MultiHeadAttention, attention_backward

    rng = np.random.default_rng([0, 16, 2])
    x, g = rng.normal(size=(2, 4, 8, 16))
    for scale in (None, 1.0):
        layer = MultiHeadAttention(16, 1, seed=np.random.SeedSequence([0, 16]), scale=scale)
        t = layer.trace(x)
        dq, _, _ = attention_backward(t["q"], t["k"], t["v"], (g @ layer.W_O.T)[:, None],
                                      scale=scale)                   # None: 1/sqrt(d_k)
        dw = np.einsum("bnd,bne->de", x, dq[:, 0])                       # (d_model, d_k)
        # two float64 products of 32 and 16 terms, summed in different orders
        np.testing.assert_allclose(dw, layer.backward(x, g)["W_Q"][:, 0], rtol=1e-12,
                                   atol=1e-12 * np.abs(dw).max())


def test_the_unscaled_layer_is_the_scaled_layer_with_W_Q_times_sqrt_d_k():
    from mha import MultiHeadAttention

    d_k = 64
    x, g = np.random.default_rng(0).normal(size=(2, 32, d_k))
    raw = MultiHeadAttention(d_k, 1, seed=0, scale=1.0)
    hot = MultiHeadAttention(d_k, 1, seed=0)
    hot.W_Q = raw.W_Q * np.sqrt(d_k)
    # sqrt(64) = 8 is a power of two: 8 W_Q, the scores 8 q k^T / 8 and every gradient are the
    # same numbers exactly, whatever order a BLAS kernel sums in
    np.testing.assert_array_equal(raw(x), hot(x))
    np.testing.assert_array_equal(raw.backward(x, g)["W_Q"], 8 * hot.backward(x, g)["W_Q"])


def test_the_control_arm_is_the_scaled_model_started_sqrt_d_k_hotter():
    """Unscaled with W_Q's learning rate over sqrt(d_k) trains exactly as the scaled model with
    W_Q times sqrt(d_k) at the full rate, when Adam's eps is 0 (with the default eps = 1e-8 the
    two differ by eps over each gradient entry: measured 4e-4 of the loss after five steps)."""
    c = T.SCALE_TRAINING
    d_k = c["d_model"] // c["h"]
    losses = []
    for hot in (False, True):
        model = T.Model(c["vocab"], c["n"], c["d_model"], c["h"], 1, readouts=2, last_only=True,
                        seed=0, scale=None if hot else 1.0)
        if hot:
            model.layers[0].W_Q *= np.sqrt(d_k)
        factors = None if hot else {"layers.0.W_Q": 1 / np.sqrt(d_k)}
        opt = T.Adam(model.parameters(), c["lr"], eps=0.0, lr_factors=factors)
        rng = np.random.default_rng([0, 1])
        found = []
        for _ in range(T.FIRST):
            loss, grads = model.loss_and_grads(*T.pair_batch(rng, c["batch"], c["n"],
                                                             c["vocab"], c["positions"]))
            found.append(loss)
            opt.step(grads)
        losses.append(found)
    # powers of two all the way (8 and 1/8, and sqrt(v / 64) = sqrt(v) / 8): exactly equal
    assert losses[0] == losses[1]


def test_the_pages_read_the_per_query_statistic_and_the_control_arm():
    from pathlib import Path

    docs = Path(__file__).resolve().parents[1] / "docs"
    for lang in ("zh", "en"):
        page = (docs / lang / "training.md").read_text(encoding="utf-8")
        assert "{ #scale-measured }" in page and "{ #summary }" in page
        for key in ('init["query_ratio"]', "'rows_below'", "'grad_S'", 'run["settings"]'):
            assert key in page, (lang, key)                         # read by a page block
        assert "unscaled_slow_W_Q" in page, lang                    # the control, by name
    for lang in ("zh", "en"):
        from mha.site.plots import TABLES
        assert TABLES["training-scale-table"](lang).count("W^Q") == 1


def test_the_induction_curves_alt_text_gives_the_kept_runs_steep_fall():
    """The figure's text names the steps over which the learning seeds' loss fell (from above
    1.5 to below 0.5, the rule the chapter's block prints), from the kept run."""
    from pathlib import Path

    ind = T.kept_run()["induction"]
    starts, ends = [], []
    for r in ind["runs"]:
        loss = np.array(r["loss"])
        low = np.flatnonzero(loss < 0.5)
        if low.size:
            starts.append(ind["steps"][np.flatnonzero(loss[:low[0]] > 1.5)[-1]])
            ends.append(ind["steps"][low[0]])
    docs = Path(__file__).resolve().parents[1] / "docs"
    en = (docs / "en" / "training.md").read_text(encoding="utf-8")
    zh = (docs / "zh" / "training.md").read_text(encoding="utf-8")
    assert f"fall steeply between steps {min(starts)} and {max(ends)}" in en
    assert f"在第 {min(starts)} 到 {max(ends)} 步之间陡降" in zh


# ---- figures and tables -----------------------------------------------------------------------

def test_figures_and_tables_are_registered_with_the_kept_run_as_a_source():
    from mha.site.plots import DEPENDS, FIGURES, TABLES

    for name in FIGURE_NAMES:
        assert name in FIGURES
    for name in TABLE_NAMES:
        assert name in TABLES
    for name in FIGURE_NAMES + TABLE_NAMES:
        assert {"site/training.py", "site/data/training.json",
                "site/plots/training.py"} <= set(DEPENDS[name])


CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.mark.parametrize("name", FIGURE_NAMES)
def test_each_figure_speaks_its_language(name):
    from mha.site.plots import FIGURES

    for lang in ("zh", "en"):
        fig = FIGURES[name](lang)
        text = "\n".join(t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text")))
        assert bool(CJK.search(text)) == (lang == "zh"), (name, lang)


def test_tables_have_a_row_per_head_setting_and_case(run):
    from mha.site.plots import TABLES

    ind = run["induction"]
    for lang in ("zh", "en"):
        scores = TABLES["training-head-scores"](lang)
        rows = [line for line in scores.splitlines() if line.startswith("| ")]
        assert len(rows) == 1 + ind["config"]["layers"] * ind["config"]["h"]
        heads = TABLES["training-heads-table"](lang)
        assert len([line for line in heads.splitlines() if line.startswith("| ")]) == 4
        h1 = run["heads"]["settings"][0]["final"]["accuracy"]
        assert f"{h1['mean']:.3f} ± {h1['std']:.3f}" in heads
        scale = TABLES["training-scale-table"](lang)
        arms = len(run["scale"]["training"]["settings"])
        assert len([line for line in scale.splitlines() if line.startswith("| ")]) == 1 + arms
        assert bool(CJK.search(scale)) == (lang == "zh")
