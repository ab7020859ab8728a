#loc1 = loc("<XLA_MLIR_DEBUGINFO_BEGIN>{\22stack_trace\22: \22File \\\22models/_basic_torch.py\\\22, line 65, in forward\\n    return torch.sort(x, dim=-1).values\22, \22nn_module_stack\22: \22L__self__,,stackwars_ir.models._basic_torch.Sort\22, \22torch_fn\22: \22sort_1;builtin_function_or_method.sort\22}<XLA_MLIR_DEBUGINFO_END>xla__device_data")
#loc3 = loc("<XLA_MLIR_DEBUGINFO_BEGIN>{}<XLA_MLIR_DEBUGINFO_END>aten__topk")
module @IrToHlo.22 attributes {mhlo.cross_program_prefetches = [], mhlo.input_output_alias = [], mhlo.is_dynamic = false, mhlo.use_auto_spmd_partitioning = false} {
  func.func @main(%arg0: tensor<1x1000xf32> loc("<XLA_MLIR_DEBUGINFO_BEGIN>{\22stack_trace\22: \22File \\\22models/_basic_torch.py\\\22, line 65, in forward\\n    return torch.sort(x, dim=-1).values\22, \22nn_module_stack\22: \22L__self__,,stackwars_ir.models._basic_torch.Sort\22, \22torch_fn\22: \22sort_1;builtin_function_or_method.sort\22}<XLA_MLIR_DEBUGINFO_END>xla__device_data")) -> tensor<1x1000xf32> {
    %0 = "stablehlo.sort"(%arg0) <{dimension = 1 : i64}> ({
    ^bb0(%arg1: tensor<f32> loc("<XLA_MLIR_DEBUGINFO_BEGIN>{}<XLA_MLIR_DEBUGINFO_END>aten__topk"), %arg2: tensor<f32> loc("<XLA_MLIR_DEBUGINFO_BEGIN>{}<XLA_MLIR_DEBUGINFO_END>aten__topk")):
      %1 = stablehlo.compare LT, %arg1, %arg2, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1> loc(#loc4)
      stablehlo.return %1 : tensor<i1> loc(#loc)
    }) : (tensor<1x1000xf32>) -> tensor<1x1000xf32> loc(#loc2)
    return %0 : tensor<1x1000xf32> loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc = loc(unknown)
#loc2 = loc("{}")
#loc4 = loc("compare.14")
