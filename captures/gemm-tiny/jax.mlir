#loc1 = loc("state['weight'].value")
#loc2 = loc("args[0]")
module @jit_forward attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<64x64xf32> loc("state['weight'].value"), %arg1: tensor<32x64xf32> loc("args[0]")) -> (tensor<32x64xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.dot_general %arg1, %arg0, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<32x64xf32>, tensor<64x64xf32>) -> tensor<32x64xf32> loc(#loc6)
    return %0 : tensor<32x64xf32> loc(#loc4)
  } loc(#loc)
} loc(#loc)
#loc = loc(unknown)
#loc3 = loc("models/gemm.py":35:15 to :46)
#loc4 = loc("jit(forward)")
#loc5 = loc("Gemm.__call__"(#loc3))
#loc6 = loc("jit(forward)/dot_general"(#loc5))
