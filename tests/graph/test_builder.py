"""Builder, state_dict loading and the native .npz format (no GL needed)."""

from pathlib import Path

import numpy as np
import pytest

import glcnn
from glcnn.graph import models, reference

SHIPPED = Path(__file__).resolve().parents[2] / "weights"


def _state(graph):
    names = {"W": "weight", "B": "bias", "scale": "weight", "mean": "running_mean",
             "var": "running_var"}
    return {f"{n.name}.{names[k]}": v for n in graph.nodes for k, v in n.weights.items()}


def test_state_dict_errors_name_key_and_shapes():
    state = _state(models.autoencoder())
    state["enc1.weight"] = np.zeros((64, 3, 3, 3), np.float32)
    with pytest.raises(glcnn.WeightError, match=r"enc1.weight.*\(64, 3, 3, 3\).*\(64, 3, 4, 4\)"):
        models.autoencoder(weights=state)
    with pytest.raises(glcnn.WeightError, match="enc9.weight"):
        models.autoencoder(weights={**_state(models.autoencoder()), "enc9.weight": np.zeros(1)})
    partial = _state(models.autoencoder())
    del partial["dec2.bias"]
    with pytest.raises(glcnn.WeightError, match="dec2.B"):
        models.autoencoder(weights=partial)


def test_state_dict_from_npz_file(tmp_path):
    state = {k: v + 1 for k, v in _state(models.autoencoder()).items()}
    np.savez(tmp_path / "ae.npz", **state)
    graph = models.autoencoder(weights=tmp_path / "ae.npz")
    np.testing.assert_array_equal(graph.node("enc2").weights["W"], state["enc2.weight"])


def test_native_model_as_weights_says_to_load_it():
    """The shipped native model passed as a state_dict used to fail with "weight
    'glcnn_graph' matches no layer"."""
    path = SHIPPED / "autoencoder.npz"
    with pytest.raises(glcnn.ModelFileError, match=r"autoencoder.npz is a glcnn native model "
                       r"\(a whole saved graph.*open it with glcnn.load\("):
        models.autoencoder(32, path)
    with pytest.raises(glcnn.ModelFileError, match="glcnn native model"):
        models.dcgan_generator(nz=32, ngf=16, weights=SHIPPED / "dcgan_shapes.npz")


def test_autoencoder_size_int_or_pair():
    assert models.autoencoder(32).inputs == {"image": (3, 32, 32)}
    assert models.autoencoder((16, 24)).inputs == {"image": (3, 16, 24)}


def test_native_round_trip(tmp_path):
    graph = models.dcgan_generator(nz=8, ngf=4)
    glcnn.save(graph, tmp_path / "g.npz")
    loaded = glcnn.load_graph(tmp_path / "g.npz")
    assert [(n.op, n.name, n.inputs, n.attrs) for n in loaded.nodes] == \
        [(n.op, n.name, n.inputs, n.attrs) for n in graph.nodes]
    z = np.random.default_rng(0).standard_normal((8, 1, 1))
    np.testing.assert_array_equal(reference.run(loaded, {"z": z})["main.13"],
                                  reference.run(graph, {"z": z})["main.13"])
    assert loaded.meta == graph.meta


def test_bad_model_files(tmp_path):
    (tmp_path / "junk.npz").write_bytes(b"not a zip at all")
    with pytest.raises(glcnn.ModelFileError, match="junk.npz"):
        glcnn.load_graph(tmp_path / "junk.npz")
    np.savez(tmp_path / "weights_only.npz", a=np.zeros(3))
    with pytest.raises(glcnn.ModelFileError, match="weights only"):
        glcnn.load_graph(tmp_path / "weights_only.npz")
    (tmp_path / "m.pt").write_bytes(b"")
    with pytest.raises(glcnn.ModelFileError, match="unknown model format '.pt'"):
        glcnn.load_graph(tmp_path / "m.pt")


def test_graph_validation_names_the_problem():
    graph = models.autoencoder()
    graph.nodes[1].inputs = ["nowhere"]
    with pytest.raises(glcnn.GraphError, match="'enc2'.*nowhere"):
        graph.validate()
