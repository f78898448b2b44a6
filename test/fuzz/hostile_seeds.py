#!/usr/bin/python3
"""test/fuzz/hostile_seeds.py — writes small instances of the hostile files of
test/test_hostile_files.c (gzip bombs, lying headers, huge lines, values past float32, NULs,
valid records padded and then cut) into the fuzz corpora as test/fuzz/corpus/<target>/hostile_* (beside the hand-made hostile_* there),
in each fuzz target's input layout. `make test` replays them; the fuzzers start from them.
Every file stays under 64 KB. Run from the repo root: /usr/bin/python3 test/fuzz/hostile_seeds.py"""
import gzip
import json
import os
import random
import struct

KP_HEADER = ("left_eye_center_x,left_eye_center_y,right_eye_center_x,right_eye_center_y,left_eye_inner_corner_x,"
             "left_eye_inner_corner_y,left_eye_outer_corner_x,left_eye_outer_corner_y,right_eye_inner_corner_x,"
             "right_eye_inner_corner_y,right_eye_outer_corner_x,right_eye_outer_corner_y,left_eyebrow_inner_end_x,"
             "left_eyebrow_inner_end_y,left_eyebrow_outer_end_x,left_eyebrow_outer_end_y,right_eyebrow_inner_end_x,"
             "right_eyebrow_inner_end_y,right_eyebrow_outer_end_x,right_eyebrow_outer_end_y,nose_tip_x,nose_tip_y,"
             "mouth_left_corner_x,mouth_left_corner_y,mouth_right_corner_x,mouth_right_corner_y,mouth_center_top_lip_x,"
             "mouth_center_top_lip_y,mouth_center_bottom_lip_x,mouth_center_bottom_lip_y,Image\n").encode()

rng = random.Random(1)


def gz(b):
    return gzip.compress(b, 9, mtime=0)


def ws(n):
    return bytes(rng.choice(b" \t\n\r") for _ in range(n))


def put(target, name, data):
    assert len(data) < 64 << 10, (target, name, len(data))
    path = os.path.join("test/fuzz/corpus", target, "hostile_" + name)
    with open(path, "wb") as f:
        f.write(data)


# mnist.json: the fuzz target parses with 2x2 images (and split size % 3), then as 28x28
img = b"[0,0,0,0],"
put("json", "1e300", b"[[[[1,1,1,1e300]],[1]],[[],[]],[[],[]]]")
put("json", "neg_1e39", b"[[[[1,1,1,-1e39]],[1]],[[],[]],[[],[]]] ")
put("json", "nul", b"[[[[1,1,1,1\0]],[1]],[[],[]],[[],[]]]")
put("json", "padded_then_cut_gz", gz(b"[[[" + img * 2000 + ws(3000) + b"[0,0,]"))
put("json", "valid_many_gz", gz(b"[[[" + img * 3000 + b"[1,2,3,4]],[" + b"1," * 3000 + b"2]],[[],[]],[[],[]]]"))

# keypoint CSV: 2x2 images first, then 96x96
row = b"".join(b"%d.5," % (30 + k) for k in range(30))
# (hostile_1e300 and hostile_nul, a row each, are older)
put("csv", "padded_then_1e300_gz", gz(KP_HEADER + (row + b"0 0 0 0\n") * 300 + b"\n\r\n" * 2000 + b"1e300" + row[4:] + b"1 2 3 4\n"))
put("csv", "huge_line_gz", gz(KP_HEADER + b"1" * (1 << 20)))

# CIFAR-10: a gzip bomb of valid records past one 10,000-record batch, a bad first label
put("cifar", "bomb_gz", gz(bytes(3073 * 10000 + 3073 * 300)))
put("cifar", "bad_label_first", bytes([66]) + bytes(3072 * 2))

# IDX: input is 2 bytes little-endian n, n bytes of images, then labels; a header whose dims
# declare more than 2^40 bytes (hostile_gzip_bomb_lying_header is older)
labels = struct.pack(">BBBBI", 0, 0, 8, 1, 1) + b"\1"
images = struct.pack(">BBBBIII", 0, 0, 8, 3, 0xffffffff, 0xffffff, 0xffff)
put("idx", "huge_dims", struct.pack("<H", len(images)) + images + labels)

# image list: first byte even -> a list (plain or gzip), odd -> an image's bytes
line = b"n01440764/n01440764_10026.JPEG 417\n"
put("image_list", "padded_then_bad_gz", b"\x10" + gz(line * 1500 + ws(4000) + b"\n" + b"a/b.png one\n"))
put("image_list", "huge_line_gz", b"\x02" + gz(b"img/" + b"a" * (1 << 20)))
put("image_list", "nul_in_path", b"\x00a\0b.png 1\nc.png 2\n")
put("image_list", "big_label", b"\x00a.png 99999999999999999999\n")
put("image_list", "junk_image", b"\x01J" + bytes(4000))
png_ihdr = b"\x89PNG\r\n\x1a\n" + bytes.fromhex("0000000d49484452000000010000000108020000009077 53de".replace(" ", ""))
put("image_list", "png_lying_header", b"\x01" + png_ihdr + bytes(4000))

# safetensors: many small tensors in one header
hdr = {"t%d" % i: {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]} for i in range(500)}
h = json.dumps(hdr, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
put("safetensors", "many_tensors", struct.pack("<Q", len(h)) + h + bytes(4 * 500))
