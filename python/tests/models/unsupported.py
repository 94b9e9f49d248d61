"""A model the front-end must refuse: ops Cleave cannot express and Python
control flow that depends on the data."""

import torch
import torch.nn as nn


class Unsupported(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.conv = nn.Conv1d(4, 4, 3, padding=1)

    def forward(self, x):
        h = self.fc(x)
        h = torch.erf(h)  # no cleave op
        if h.sum() > 0:  # data-dependent branch
            h = h * 2
        h = h.cumsum(dim=-1)  # no cleave op
        h = self.conv(h.view(2, 4, 8))  # no cleave op
        return h.mean()
