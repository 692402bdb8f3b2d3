"""Writes the torchvision references of the training transforms that
tests/unit/input_transform_test.cpp compares with (engine/training/input_transform.h):

  image.npy                 uint8 [2, 9, 11, 3], two channels-last images (seed 0)
  normalized.npy            ToTensor, then Normalize(MEAN, STD): float32 [2, 3, 9, 11]
  flipped.npy               ToTensor, then F.hflip
  crop_T_L.npy              ToTensor, F.pad(2) and F.crop at (T, L) of the padded image
  resized_T_L_H_W_S.npy     ToTensor, F.resized_crop(T, L, H, W, [S, S], bilinear, antialias)
  evaluation_S.npy          ToTensor, Resize(S * 256 // 224, antialias), CenterCrop(S)
  resized_crop_stats.npy    float64 [4]: the mean and standard deviation of the area share
                            and of the log aspect ratio of RandomResizedCrop.get_params's
                            windows of a 32x32 image, over 20000 draws (torch seed 0)

Run with Debian's interpreter, which has torch and torchvision:
  OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 tests/data/transforms/make_references.py
"""
import math
import pathlib

import numpy as np
import torch
import torchvision.transforms as T
import torchvision.transforms.functional as F

HERE = pathlib.Path(__file__).resolve().parent
MEAN, STD = [0.4914, 0.4822, 0.4465], [0.247, 0.243, 0.261]
CROPS = [(0, 0), (4, 4), (1, 3), (3, 0)]
RESIZED = [(1, 2, 6, 7, 5), (0, 0, 9, 11, 4), (2, 1, 5, 4, 16), (0, 3, 9, 8, 9)]
EVALUATIONS = [7, 4]


def save(name, array):
    np.save(HERE / name, np.ascontiguousarray(array))


def main():
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(2, 9, 11, 3), dtype=np.uint8)
    save("image.npy", images)
    tensors = torch.stack([T.ToTensor()(image) for image in images])  # [2, 3, 9, 11]
    save("normalized.npy", torch.stack([F.normalize(t, MEAN, STD) for t in tensors]).numpy())
    save("flipped.npy", F.hflip(tensors).numpy())
    for top, left in CROPS:
        padded = F.pad(tensors, [2], fill=0)
        save(f"crop_{top}_{left}.npy", F.crop(padded, top, left, 9, 11).numpy())
    for top, left, h, w, s in RESIZED:
        out = F.resized_crop(tensors, top, left, h, w, [s, s],
                             T.InterpolationMode.BILINEAR, antialias=True)
        save(f"resized_{top}_{left}_{h}_{w}_{s}.npy", out.numpy())
    for s in EVALUATIONS:
        evaluation = T.Compose([T.Resize(s * 256 // 224, antialias=True), T.CenterCrop(s)])
        save(f"evaluation_{s}.npy", evaluation(tensors).numpy())
    torch.manual_seed(0)
    image = torch.zeros(3, 32, 32)
    shares, log_ratios = [], []
    for _ in range(20000):
        _, _, h, w = T.RandomResizedCrop.get_params(image, (0.08, 1.0), (3 / 4, 4 / 3))
        shares.append(h * w / 1024)
        log_ratios.append(math.log(w / h))
    save("resized_crop_stats.npy", np.array(
        [np.mean(shares), np.std(shares), np.mean(log_ratios), np.std(log_ratios)]))


if __name__ == "__main__":
    main()
