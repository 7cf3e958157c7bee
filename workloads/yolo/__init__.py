"""The YOLO family (yolov5s, yolov8n, yolov8s): one package, shared blocks, v5 and v8 heads and losses.

A faithful re-implementation of the Ultralytics / mindyolo networks, assigners and losses rather than a
dependency on mindyolo 0.5.0: that release pins `opencv-python<4.12` (this project adds no OpenCV;
augmentation is Pillow + numpy), and its YOLOv8 loss breaks under MindSpore 2.10, where
`Tensor.max(-2)` now returns (values, indices). The losses here keep static shapes (ground truth padded
per image with a mask), so they compile in graph mode as well as running in PyNative.

Modules: layers (Conv-BN-SiLU, Bottleneck, C3, C2f, SPPF), network (backbone/neck/heads from depth and
width multiples), boxes (CIoU, box coding, anchors), loss_v5, loss_v8 (task-aligned assigner, DFL),
data (generated JPEG shape scenes), augment (mosaic, affine, HSV, flip, letterbox), postprocess
(decode + NMS), metrics (COCO mAP via pycocotools), workload (the three workloads).
"""
