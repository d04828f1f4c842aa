"""kinemesh.viz: look at things.

* :mod:`kinemesh.viz.render` - headless offscreen rendering to PNG/GIF/MP4 (``render_frames``,
  ``render_image``, ``contact_sheet``) with the NumPy z-buffer of :mod:`kinemesh.viz.raster`;
* :mod:`kinemesh.viz.plots` - matplotlib PNG plots (curves, eigen-spectrum, histogram, training curves);
* :mod:`kinemesh.viz.inputs` - any input (mesh, sequence, URDF/PartNet folder, articulation JSON) as a
  ``Drawable`` (frames, faces, part ids, joint-axis arrows);
* :mod:`kinemesh.viz.viewer` - the interactive browser viewer (``ViewerApp`` state + ``ViewerGUI`` on viser).

Submodules are imported on demand so ``import kinemesh.viz`` stays light.
"""
