#loc1 = loc("<XLA_MLIR_DEBUGINFO_BEGIN>{\22stack_trace\22: \22File \\\22models/_basic_torch.py\\\22, line 55, in forward\\n    return a @ b\22, \22nn_module_stack\22: \22L__self__,,stackwars_ir.models._basic_torch.Matmul\22, \22torch_fn\22: \22matmul_1;method_descriptor.matmul\22}<XLA_MLIR_DEBUGINFO_END>xla__device_data")
module @IrToHlo.7 attributes {mhlo.cross_program_prefetches = [], mhlo.input_output_alias = [], mhlo.is_dynamic = false, mhlo.use_auto_spmd_partitioning = false} {
  func.func @main(%arg0: tensor<1x100x100xf32> loc("<XLA_MLIR_DEBUGINFO_BEGIN>{\22stack_trace\22: \22File \\\22models/_basic_torch.py\\\22, line 55, in forward\\n    return a @ b\22, \22nn_module_stack\22: \22L__self__,,stackwars_ir.models._basic_torch.Matmul\22, \22torch_fn\22: \22matmul_1;method_descriptor.matmul\22}<XLA_MLIR_DEBUGINFO_END>xla__device_data"), %arg1: tensor<1x100x100xf32> loc("<XLA_MLIR_DEBUGINFO_BEGIN>{\22stack_trace\22: \22File \\\22models/_basic_torch.py\\\22, line 55, in forward\\n    return a @ b\22, \22nn_module_stack\22: \22L__self__,,stackwars_ir.models._basic_torch.Matmul\22, \22torch_fn\22: \22matmul_1;method_descriptor.matmul\22}<XLA_MLIR_DEBUGINFO_END>xla__device_data")) -> tensor<1x100x100xf32> {
    %0 = stablehlo.dot_general %arg1, %arg0, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<1x100x100xf32>, tensor<1x100x100xf32>) -> tensor<1x100x100xf32> loc(#loc2)
    return %0 : tensor<1x100x100xf32> loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc = loc(unknown)
#loc2 = loc("{\22stack_trace\22: \22File \\\22models/_basic_torch.py\\\22, line 55, in forward\\n    return a @ b\22, \22nn_module_stack\22: \22L__self__,,stackwars_ir.models._basic_torch.Matmul\22, \22torch_fn\22: \22matmul_1;method_descriptor.matmul\22}")
