#!/usr/bin/python3
# tools/wlm_corpus.py — the word_language_model corpus out of Debian's `fortunes` package: running
# English text (quotes, jokes, definitions, poems) prepared the way Penn Treebank and WikiText-2
# are for the original example: lower-cased, punctuation split from words, words seen fewer than
# 3 times in the whole text replaced by <unk>, one text line per line (the sample adds <eos>, as
# the original's data.py does). Fortune k (in file-name order, then file order) goes to valid.txt
# when k % 20 == 18, to test.txt when k % 20 == 19, else to train.txt: about 550k / 30k / 30k
# tokens, a vocabulary of about 12k.
#
#   /usr/bin/python3 tools/wlm_corpus.py /usr/share/games/fortunes OUT_DIR
import collections
import os
import re
import sys


def main():
    src, out = sys.argv[1], sys.argv[2]
    names = sorted(f for f in os.listdir(src) if not f.endswith((".dat", ".u8")) and os.path.isfile(os.path.join(src, f)))
    if not names:
        sys.exit("wlm_corpus: no fortune files in %s (apt-get install fortunes)" % src)
    fortunes = []
    for n in names:
        with open(os.path.join(src, n), encoding="latin-1") as f:
            fortunes += [x for x in re.split(r"\n%\n", f.read()) if x.strip()]
    split = lambda s: re.sub(r"([^a-z0-9'\s])", r" \1 ", s.lower()).split()
    counts = collections.Counter(w for fo in fortunes for line in fo.split("\n") for w in split(line))
    os.makedirs(out, exist_ok=True)
    files = {k: open(os.path.join(out, k + ".txt"), "w", encoding="utf-8", newline="\n") for k in ("train", "valid", "test")}
    for k, fo in enumerate(fortunes):
        dest = files["valid" if k % 20 == 18 else "test" if k % 20 == 19 else "train"]
        for line in fo.split("\n"):
            words = [w if counts[w] >= 3 else "<unk>" for w in split(line)]
            if words:
                dest.write(" ".join(words) + "\n")
    for f in files.values():
        f.close()


if __name__ == "__main__":
    main()
