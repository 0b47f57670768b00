"""The code behind the CLI's tooling commands: `diff`, `bench`, the PyTorch runner they compare
against, and the README's ops table. Only `glcnn.cli` imports this package.
"""
