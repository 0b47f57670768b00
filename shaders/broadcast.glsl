// broadcast.glsl - read a tensor broadcast onto the output's shape (numpy/ONNX broadcasting
// on glcnn shapes, glcnn/ops/binary.py): an axis of size 1 in `shape` is read at index 0
// whatever the output's index there; a single channel (C = 1) fills all 4 lanes.
// Included by binary.glsl, layernorm.glsl.

vec4 fetch_broadcast(sampler2D t, ivec4 shape, int slice, int y, int x) {
    int yy = shape.y == 1 ? 0 : y;
    int xx = shape.z == 1 ? 0 : x;
    if (shape.x == 1) {
        return vec4(fetch(t, shape, 0, yy, xx).x);
    }
    return fetch(t, shape, slice, yy, xx);
}
