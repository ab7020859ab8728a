#loc1 = loc("<XLA_MLIR_DEBUGINFO_BEGIN>{\22stack_trace\22: \22File \\\22models/_basic_torch.py\\\22, line 16, in forward\\n    return x @ self.weight\22, \22nn_module_stack\22: \22L__self__,,stackwars_ir.models._basic_torch.Gemm\22, \22torch_fn\22: \22matmul_1;method_descriptor.matmul\22}<XLA_MLIR_DEBUGINFO_END>xla__device_data")
module @IrToHlo.5 attributes {mhlo.cross_program_prefetches = [], mhlo.input_output_alias = [], mhlo.is_dynamic = false, mhlo.use_auto_spmd_partitioning = false} {
  func.func @main(%arg0: tensor<64x64xf32> loc("<XLA_MLIR_DEBUGINFO_BEGIN>{\22stack_trace\22: \22File \\\22models/_basic_torch.py\\\22, line 16, in forward\\n    return x @ self.weight\22, \22nn_module_stack\22: \22L__self__,,stackwars_ir.models._basic_torch.Gemm\22, \22torch_fn\22: \22matmul_1;method_descriptor.matmul\22}<XLA_MLIR_DEBUGINFO_END>xla__device_data"), %arg1: tensor<32x64xf32> loc("<XLA_MLIR_DEBUGINFO_BEGIN>{\22stack_trace\22: \22File \\\22models/_basic_torch.py\\\22, line 16, in forward\\n    return x @ self.weight\22, \22nn_module_stack\22: \22L__self__,,stackwars_ir.models._basic_torch.Gemm\22, \22torch_fn\22: \22matmul_1;method_descriptor.matmul\22}<XLA_MLIR_DEBUGINFO_END>xla__device_data")) -> tensor<32x64xf32> {
    %0 = stablehlo.dot_general %arg1, %arg0, contracting_dims = [1] x [0] : (tensor<32x64xf32>, tensor<64x64xf32>) -> tensor<32x64xf32> loc(#loc2)
    return %0 : tensor<32x64xf32> loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc = loc(unknown)
#loc2 = loc("{}")
