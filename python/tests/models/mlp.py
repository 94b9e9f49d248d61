"""A two-layer MLP classifier, trained with a loss function applied to its
output (the loss is not part of the module)."""

import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, n_in=16, n_hidden=32, n_out=10):
        super().__init__()
        self.fc1 = nn.Linear(n_in, n_hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(n_hidden, n_hidden)
        self.fc3 = nn.Linear(n_hidden, n_out)

    def forward(self, x):
        h = self.act(self.fc1(x))
        h = F.relu(self.fc2(h))
        return self.fc3(h)
