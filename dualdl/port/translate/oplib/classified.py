"""The MXNet 1.9.1 ops that are refused (with why and what to do) or not part of a model's forward
(optimizer updates, I/O, image augmentation, graph plumbing): every op MXNet registers has an
entry, so a new MXNet build's new ops fail tests/test_translate_op_registry.py loudly."""
from __future__ import annotations

from .base import inapplicable, refuse

__all__: list = []

# ----- not part of a forward ---------------------------------------------------------------------
_OPT = ("an optimizer update (the Trainer's step, not the model's forward): dualdl.port.translate_trainer "
        "translates the Trainer")
inapplicable(_OPT, "_adamw_update", "_mp_adamw_update", "_multi_adamw_update", "_multi_lamb_update",
             "_multi_mp_adamw_update", "_multi_mp_lamb_update", "_contrib_group_adagrad_update",
             "_sparse_adagrad_update", "_sparse_adam_update", "_sparse_ftrl_update", "_sparse_sgd_mom_update",
             "_sparse_sgd_update", "adam_update", "ftml_update", "ftrl_update", "lamb_update_phase1",
             "lamb_update_phase2", "mp_lamb_update_phase1", "mp_lamb_update_phase2", "mp_nag_mom_update",
             "mp_sgd_mom_update", "mp_sgd_update", "multi_lars", "multi_mp_sgd_mom_update", "multi_mp_sgd_update",
             "multi_sgd_mom_update", "multi_sgd_update", "nag_mom_update", "preloaded_multi_mp_sgd_mom_update",
             "preloaded_multi_mp_sgd_update", "preloaded_multi_sgd_mom_update", "preloaded_multi_sgd_update",
             "rmsprop_update", "rmspropalex_update", "sgd_mom_update", "sgd_update", "signsgd_update",
             "signum_update", "all_finite", "multi_all_finite", "multi_sum_sq", "reset_arrays")
inapplicable("image decoding or file I/O (data loading, before the model)", "_cvcopyMakeBorder", "_cvimdecode",
             "_cvimread", "_cvimresize", "_imdecode", "_npi_cvimdecode", "_npi_cvimread", "_npi_cvimresize")
_IMG = "an image transform of gluon.data.vision.transforms (data loading, before the model)"
inapplicable(_IMG, *[f"{p}{n}" for p in ("_image_", "_npx__image_") for n in (
    "adjust_lighting", "crop", "flip_left_right", "flip_top_bottom", "normalize", "random_brightness",
    "random_color_jitter", "random_contrast", "random_flip_left_right", "random_flip_top_bottom", "random_hue",
    "random_lighting", "random_saturation", "resize", "to_tensor")])
inapplicable("graph and engine plumbing MXNet inserts itself (never in a block's recorded forward)", "_CachedOp",
             "_CachedOpThreadSafe", "_CrossDeviceCopy", "_NDArray", "_Native", "_NoGradient",
             "_copyto", "_npi_copyto", "_set_value", "_identity_with_attr_like_rhs", "_npi_share_memory",
             "_zeros_without_dtype", "_rnn_param_concat",
             "_npi_rnn_param_concat")
inapplicable("an MKLDNN-fused op of a quantised or optimised graph (the plain graph holds the ops it fuses)",
             "_sg_mkldnn_conv", "_sg_mkldnn_fully_connected", "_sg_mkldnn_selfatt_qk", "_sg_mkldnn_selfatt_valatt")
inapplicable("sparse storage (cast_storage, retain, getnnz, square_sum): dualdl translates dense models",
             "_sparse_cast_storage", "cast_storage", "_sparse_retain", "_contrib_getnnz", "_square_sum",
             "_contrib_SparseEmbedding")
inapplicable("int8 quantisation (a quantised graph; translate the float model it came from)", *[
    f"_contrib_{n}" for n in ("calibrate_entropy", "dequantize", "quantize", "quantize_asym", "quantize_v2",
                              "quantized_act", "quantized_batch_norm", "quantized_concat", "quantized_conv",
                              "quantized_elemwise_add", "quantized_elemwise_mul", "quantized_embedding",
                              "quantized_flatten", "quantized_fully_connected", "quantized_pooling",
                              "quantized_rnn", "requantize")])
inapplicable("DGL graph sampling (a data-pipeline op)", "_contrib_dgl_adjacency",
             "_contrib_dgl_csr_neighbor_non_uniform_sample", "_contrib_dgl_csr_neighbor_uniform_sample",
             "_contrib_dgl_graph_compact", "_contrib_dgl_subgraph", "_contrib_edge_id")
inapplicable("in-place assignment (x[...] = v on an NDArray, outside a recorded forward)", "_crop_assign",
             "_crop_assign_scalar", "_slice_assign", "_slice_assign_scalar", "_npi_slice_assign",
             "_npi_slice_assign_scalar", "_npi_boolean_mask_assign_scalar", "_npi_boolean_mask_assign_tensor",
             "_scatter_set_nd", "_npi_scatter_set_nd")

# ----- refused, with what to do --------------------------------------------------------------------
_RANDOM = ("a random sampler: torch's generator draws other numbers than MXNet's, so no translation can be "
           "proven equal; draw the numbers outside the model and pass them in as an input")
refuse(_RANDOM, *[p + n for p in ("_random_", "random_") for n in (
    "exponential", "gamma", "generalized_negative_binomial", "negative_binomial", "normal", "poisson", "uniform",
    "randint")], *[f"_random_{n}_like" for n in ("exponential", "gamma", "generalized_negative_binomial",
                                                  "negative_binomial", "normal", "poisson", "uniform")],
       *[p + n for p in ("_sample_", "sample_") for n in ("exponential", "gamma", "generalized_negative_binomial",
                                                         "multinomial", "negative_binomial", "normal", "poisson",
                                                         "uniform")],
       "_sample_unique_zipfian", "_npi_powerd", "normal", "uniform", "shuffle", "_shuffle", "_npi_shuffle", "_npi_random_randint",
       *[f"_npi_{n}" for n in ("bernoulli", "choice", "exponential", "gamma", "gumbel", "logistic", "multinomial",
                               "normal", "normal_n", "pareto", "rayleigh", "uniform", "uniform_n", "weibull")])
_LOSS = ("a loss output layer whose backward is the loss gradient itself, not the gradient of its forward "
         "(autograd of the torch form would differ); compute the loss with a gluon.loss / torch loss instead")
refuse(_LOSS, "LinearRegressionOutput", "LogisticRegressionOutput", "MAERegressionOutput", "SVMOutput", "Softmax",
       "SoftmaxOutput", "MakeLoss", "make_loss", "_sparse_LinearRegressionOutput", "_sparse_LogisticRegressionOutput",
       "_sparse_MAERegressionOutput", "_sparse_make_loss", "IdentityAttachKLSparseReg")
refuse("a Python custom op (mx.operator.CustomOp / autograd.Function): its code is not in the graph; register a "
       "translation for it", "Custom", "_npi_Custom", "_CustomFunction")
refuse("translated as a layer (the Gluon block or the symbol node with its parameters: leaves.py, "
       "symbol_layers.py), not as an op inside a block's own forward; call the Gluon layer instead of F.RNN",
       "RNN", "_npx_rnn")
refuse("a detection-target or proposal op (SSD/Faster R-CNN training targets and proposals) not yet "
       "translated; box_nms / box_decode / box_iou / ROIAlign / MultiBoxPrior are", "_contrib_MultiBoxDetection",
       "_contrib_MultiBoxTarget", "_npx_multibox_detection", "_npx_multibox_target", "_contrib_MultiProposal",
       "_contrib_Proposal", "_contrib_bipartite_matching",
       "_contrib_PSROIPooling",
       "_contrib_DeformablePSROIPooling", "_contrib_RROIAlign")
refuse("deformable convolution: torch has no such op without torchvision (the generated file imports torch only)",
       "_contrib_DeformableConvolution", "_contrib_ModulatedDeformableConvolution")
refuse("computed by MXNet 1.9.1 on GPU only ('fft is only available for GPU'): not measured on a CPU, so not "
       "translated; torch.fft.fft with real and imaginary parts interleaved would write it", "_contrib_fft", "_contrib_ifft")
refuse("Correlation (FlowNet's correlation layer): torch has no such op; register a translation", "Correlation")
refuse("an output whose shape depends on the values (boolean_mask, nonzero, unique, bincount, histogram): the "
       "generated forward has static shapes; mask with torch.where instead", "_contrib_boolean_mask",
       "_npi_boolean_mask", "_npi_nonzero", "_npx_nonzero", "_npi_unique", "_npi_bincount", "_histogram",
       "_npi_histogram", "_npi_delete", "_npi_insert_scalar", "_npi_insert_slice", "_npi_insert_tensor")
refuse("a decomposition whose gradient or sign convention MXNet defines differently from torch.linalg (eig*, svd, "
       "gelqf, syevd, pinv, tensorinv/solve): not yet measured, so not translated", "_npi_eig", "_npi_eigh",
       "_npi_eigvals", "_npi_eigvalsh", "_npi_svd", "_npi_pinv", "_npi_pinv_scalar_rcond", "_npi_tensorinv",
       "_npi_tensorsolve", "linalg_gelqf", "_linalg_gelqf", "_linalg_syevd")
_LATER = "not yet translated (no model in the corpus uses it); register a translation"
refuse(_LATER, "_contrib_count_sketch", "_contrib_hawkesll",
       "_npi_diag_indices_from",
       "_npx_constraint_check", "amp_multicast")
