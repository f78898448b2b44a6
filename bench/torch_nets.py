"""bench/torch_nets.py — the PyTorch networks that more than one bench script runs, one
definition for the CPU (models_torch.py) and the GPU (gpu_models_torch.py) comparisons."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MnistCNN(nn.Module):  # Paddle's multi-GPU MNIST tutorial (softmax folded into the loss), as dg_mnist_cnn
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, 5, 1, 2)
        self.conv2 = nn.Conv2d(20, 20, 5, 1, 2)
        self.fc = nn.Linear(980, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2, 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2, 2)
        return self.fc(torch.flatten(x, 1))
