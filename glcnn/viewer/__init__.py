"""The live window (`glcnn view`): frame sources, the display shader, network bending.

Sits above the runtime: it drives a `Pipeline` and draws its textures.
"""
