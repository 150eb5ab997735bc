// RUN: dlpc-opt %s --split-input-file -p loop-opencl-winograd | filecheck %s
// RUN: dlpc-opt %s --split-input-file -p loop-opencl-winograd > %t.once
// RUN: dlpc-opt %s --split-input-file -p loop-opencl-winograd,loop-opencl-winograd > %t.twice
// RUN: diff %t.once %t.twice

// A chain the fused OpenCL kernel takes (8 output channels, 8 tile columns, padding 1,
// relu epilogue; te-to-loop's nests from `dlpc` with graph_winograd where=all): the input
// transform, reshapes and matmul move into the output transform's kernel, which records
// the roles of its buffers among the values it uses; the chain's deallocs follow it.
// CHECK-LABEL: func.func @main
// CHECK-NOT:     loop.kernel "winograd_input_transform_0"
// CHECK-NOT:     loop.kernel "matmul_2"
// CHECK:         loop.kernel "winograd_output_transform_relu_0" attributes {origin = "graph.fused(graph.winograd_output_transform, graph.relu)", opencl_winograd = "fused x=0 u=3 bias=6 residual=-1 y=7"}
// CHECK:           loop.for %{{.*}} = 0 to 16 step 1 {name = "w0_i0", parallel}
// CHECK:           loop.for %{{.*}} = 0 to 16 step 1 {name = "w3_i0", parallel}
// CHECK:         memref.dealloc %winograd_input_transform
// CHECK-NEXT:    memref.dealloc %reshape :
// CHECK-NEXT:    memref.dealloc %matmul :
// CHECK-NEXT:    memref.dealloc %reshape_1 :
// CHECK-NEXT:    func.return

builtin.module {
  "memref.global"() <{sym_name = "__constant_0", type = memref<16x1x8x1xf32>, initial_value = dense<5.000000e-01> : tensor<16x1x8x1xf32>, sym_visibility = "private", constant}> : () -> ()
  func.func @main(%x: memref<1x1x2x16xf32> {dlpc.name = "x"}, %b: memref<8xf32> {dlpc.name = "b"}, %out0: memref<1x8x2x16xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["b"], dlpc.num_outputs = 1 : i64} {
    %__constant = memref.get_global @__constant_0 : memref<16x1x8x1xf32>
    %winograd_input_transform = memref.alloc() : memref<16x1x1x1x8xf32>
    loop.kernel "winograd_input_transform_0" attributes {origin = "graph.winograd_input_transform"} {
      loop.for %i0 = 0 to 16 step 1 {name = "i0", parallel} {
        loop.for %i1 = 0 to 1 step 1 {name = "i1"} {
          loop.for %i2 = 0 to 1 step 1 {name = "i2"} {
            loop.for %i3 = 0 to 1 step 1 {name = "i3"} {
              loop.for %i4 = 0 to 8 step 1 {name = "i4", vectorize} {
                %0 = arith.constant 4 : index
                %1 = arith.divsi %i0, %0 : index
                %2 = arith.constant 4 : index
                %3 = arith.remsi %i0, %2 : index
                %4 = arith.constant 2 : index
                %5 = arith.muli %i3, %4 : index
                %6 = arith.constant 1 : index
                %7 = arith.subi %5, %6 : index
                %8 = arith.constant 2 : index
                %9 = arith.muli %i3, %8 : index
                %10 = arith.constant 1 : index
                %11 = arith.addi %9, %10 : index
                %12 = arith.constant 1 : index
                %13 = arith.subi %11, %12 : index
                %14 = arith.constant 2 : index
                %15 = arith.muli %i3, %14 : index
                %16 = arith.constant 2 : index
                %17 = arith.addi %15, %16 : index
                %18 = arith.constant 1 : index
                %19 = arith.subi %17, %18 : index
                %20 = arith.constant 2 : index
                %21 = arith.muli %i3, %20 : index
                %22 = arith.constant 3 : index
                %23 = arith.addi %21, %22 : index
                %24 = arith.constant 1 : index
                %25 = arith.subi %23, %24 : index
                %26 = arith.constant 2 : index
                %27 = arith.muli %i4, %26 : index
                %28 = arith.constant 1 : index
                %29 = arith.subi %27, %28 : index
                %30 = arith.constant 2 : index
                %31 = arith.muli %i4, %30 : index
                %32 = arith.constant 1 : index
                %33 = arith.addi %31, %32 : index
                %34 = arith.constant 1 : index
                %35 = arith.subi %33, %34 : index
                %36 = arith.constant 2 : index
                %37 = arith.muli %i4, %36 : index
                %38 = arith.constant 2 : index
                %39 = arith.addi %37, %38 : index
                %40 = arith.constant 1 : index
                %41 = arith.subi %39, %40 : index
                %42 = arith.constant 2 : index
                %43 = arith.muli %i4, %42 : index
                %44 = arith.constant 3 : index
                %45 = arith.addi %43, %44 : index
                %46 = arith.constant 1 : index
                %47 = arith.subi %45, %46 : index
                %48 = arith.constant 0 : index
                %49 = arith.cmpi sge, %7, %48 : index
                %50 = arith.constant 2 : index
                %51 = arith.cmpi slt, %7, %50 : index
                %52 = arith.andi %49, %51 : i1
                %53 = arith.constant 0 : index
                %54 = arith.cmpi sge, %29, %53 : index
                %55 = arith.constant 16 : index
                %56 = arith.cmpi slt, %29, %55 : index
                %57 = arith.andi %54, %56 : i1
                %58 = arith.andi %52, %57 : i1
                %59 = scf.if %58 -> (f32) {
                  %60 = memref.load %x[%i1, %i2, %7, %29] : memref<1x1x2x16xf32>
                  scf.yield %60 : f32
                } else {
                  %61 = arith.constant 0.000000e+00 : f32
                  scf.yield %61 : f32
                }
                %62 = arith.constant 0 : index
                %63 = arith.cmpi sge, %7, %62 : index
                %64 = arith.constant 2 : index
                %65 = arith.cmpi slt, %7, %64 : index
                %66 = arith.andi %63, %65 : i1
                %67 = arith.constant 0 : index
                %68 = arith.cmpi sge, %35, %67 : index
                %69 = arith.constant 16 : index
                %70 = arith.cmpi slt, %35, %69 : index
                %71 = arith.andi %68, %70 : i1
                %72 = arith.andi %66, %71 : i1
                %73 = scf.if %72 -> (f32) {
                  %74 = memref.load %x[%i1, %i2, %7, %35] : memref<1x1x2x16xf32>
                  scf.yield %74 : f32
                } else {
                  %75 = arith.constant 0.000000e+00 : f32
                  scf.yield %75 : f32
                }
                %76 = arith.constant 0 : index
                %77 = arith.cmpi sge, %7, %76 : index
                %78 = arith.constant 2 : index
                %79 = arith.cmpi slt, %7, %78 : index
                %80 = arith.andi %77, %79 : i1
                %81 = arith.constant 0 : index
                %82 = arith.cmpi sge, %41, %81 : index
                %83 = arith.constant 16 : index
                %84 = arith.cmpi slt, %41, %83 : index
                %85 = arith.andi %82, %84 : i1
                %86 = arith.andi %80, %85 : i1
                %87 = scf.if %86 -> (f32) {
                  %88 = memref.load %x[%i1, %i2, %7, %41] : memref<1x1x2x16xf32>
                  scf.yield %88 : f32
                } else {
                  %89 = arith.constant 0.000000e+00 : f32
                  scf.yield %89 : f32
                }
                %90 = arith.constant 0 : index
                %91 = arith.cmpi sge, %7, %90 : index
                %92 = arith.constant 2 : index
                %93 = arith.cmpi slt, %7, %92 : index
                %94 = arith.andi %91, %93 : i1
                %95 = arith.constant 0 : index
                %96 = arith.cmpi sge, %47, %95 : index
                %97 = arith.constant 16 : index
                %98 = arith.cmpi slt, %47, %97 : index
                %99 = arith.andi %96, %98 : i1
                %100 = arith.andi %94, %99 : i1
                %101 = scf.if %100 -> (f32) {
                  %102 = memref.load %x[%i1, %i2, %7, %47] : memref<1x1x2x16xf32>
                  scf.yield %102 : f32
                } else {
                  %103 = arith.constant 0.000000e+00 : f32
                  scf.yield %103 : f32
                }
                %104 = arith.constant 0 : index
                %105 = arith.cmpi sge, %13, %104 : index
                %106 = arith.constant 2 : index
                %107 = arith.cmpi slt, %13, %106 : index
                %108 = arith.andi %105, %107 : i1
                %109 = arith.constant 0 : index
                %110 = arith.cmpi sge, %29, %109 : index
                %111 = arith.constant 16 : index
                %112 = arith.cmpi slt, %29, %111 : index
                %113 = arith.andi %110, %112 : i1
                %114 = arith.andi %108, %113 : i1
                %115 = scf.if %114 -> (f32) {
                  %116 = memref.load %x[%i1, %i2, %13, %29] : memref<1x1x2x16xf32>
                  scf.yield %116 : f32
                } else {
                  %117 = arith.constant 0.000000e+00 : f32
                  scf.yield %117 : f32
                }
                %118 = arith.constant 0 : index
                %119 = arith.cmpi sge, %13, %118 : index
                %120 = arith.constant 2 : index
                %121 = arith.cmpi slt, %13, %120 : index
                %122 = arith.andi %119, %121 : i1
                %123 = arith.constant 0 : index
                %124 = arith.cmpi sge, %35, %123 : index
                %125 = arith.constant 16 : index
                %126 = arith.cmpi slt, %35, %125 : index
                %127 = arith.andi %124, %126 : i1
                %128 = arith.andi %122, %127 : i1
                %129 = scf.if %128 -> (f32) {
                  %130 = memref.load %x[%i1, %i2, %13, %35] : memref<1x1x2x16xf32>
                  scf.yield %130 : f32
                } else {
                  %131 = arith.constant 0.000000e+00 : f32
                  scf.yield %131 : f32
                }
                %132 = arith.constant 0 : index
                %133 = arith.cmpi sge, %13, %132 : index
                %134 = arith.constant 2 : index
                %135 = arith.cmpi slt, %13, %134 : index
                %136 = arith.andi %133, %135 : i1
                %137 = arith.constant 0 : index
                %138 = arith.cmpi sge, %41, %137 : index
                %139 = arith.constant 16 : index
                %140 = arith.cmpi slt, %41, %139 : index
                %141 = arith.andi %138, %140 : i1
                %142 = arith.andi %136, %141 : i1
                %143 = scf.if %142 -> (f32) {
                  %144 = memref.load %x[%i1, %i2, %13, %41] : memref<1x1x2x16xf32>
                  scf.yield %144 : f32
                } else {
                  %145 = arith.constant 0.000000e+00 : f32
                  scf.yield %145 : f32
                }
                %146 = arith.constant 0 : index
                %147 = arith.cmpi sge, %13, %146 : index
                %148 = arith.constant 2 : index
                %149 = arith.cmpi slt, %13, %148 : index
                %150 = arith.andi %147, %149 : i1
                %151 = arith.constant 0 : index
                %152 = arith.cmpi sge, %47, %151 : index
                %153 = arith.constant 16 : index
                %154 = arith.cmpi slt, %47, %153 : index
                %155 = arith.andi %152, %154 : i1
                %156 = arith.andi %150, %155 : i1
                %157 = scf.if %156 -> (f32) {
                  %158 = memref.load %x[%i1, %i2, %13, %47] : memref<1x1x2x16xf32>
                  scf.yield %158 : f32
                } else {
                  %159 = arith.constant 0.000000e+00 : f32
                  scf.yield %159 : f32
                }
                %160 = arith.constant 0 : index
                %161 = arith.cmpi sge, %19, %160 : index
                %162 = arith.constant 2 : index
                %163 = arith.cmpi slt, %19, %162 : index
                %164 = arith.andi %161, %163 : i1
                %165 = arith.constant 0 : index
                %166 = arith.cmpi sge, %29, %165 : index
                %167 = arith.constant 16 : index
                %168 = arith.cmpi slt, %29, %167 : index
                %169 = arith.andi %166, %168 : i1
                %170 = arith.andi %164, %169 : i1
                %171 = scf.if %170 -> (f32) {
                  %172 = memref.load %x[%i1, %i2, %19, %29] : memref<1x1x2x16xf32>
                  scf.yield %172 : f32
                } else {
                  %173 = arith.constant 0.000000e+00 : f32
                  scf.yield %173 : f32
                }
                %174 = arith.constant 0 : index
                %175 = arith.cmpi sge, %19, %174 : index
                %176 = arith.constant 2 : index
                %177 = arith.cmpi slt, %19, %176 : index
                %178 = arith.andi %175, %177 : i1
                %179 = arith.constant 0 : index
                %180 = arith.cmpi sge, %35, %179 : index
                %181 = arith.constant 16 : index
                %182 = arith.cmpi slt, %35, %181 : index
                %183 = arith.andi %180, %182 : i1
                %184 = arith.andi %178, %183 : i1
                %185 = scf.if %184 -> (f32) {
                  %186 = memref.load %x[%i1, %i2, %19, %35] : memref<1x1x2x16xf32>
                  scf.yield %186 : f32
                } else {
                  %187 = arith.constant 0.000000e+00 : f32
                  scf.yield %187 : f32
                }
                %188 = arith.constant 0 : index
                %189 = arith.cmpi sge, %19, %188 : index
                %190 = arith.constant 2 : index
                %191 = arith.cmpi slt, %19, %190 : index
                %192 = arith.andi %189, %191 : i1
                %193 = arith.constant 0 : index
                %194 = arith.cmpi sge, %41, %193 : index
                %195 = arith.constant 16 : index
                %196 = arith.cmpi slt, %41, %195 : index
                %197 = arith.andi %194, %196 : i1
                %198 = arith.andi %192, %197 : i1
                %199 = scf.if %198 -> (f32) {
                  %200 = memref.load %x[%i1, %i2, %19, %41] : memref<1x1x2x16xf32>
                  scf.yield %200 : f32
                } else {
                  %201 = arith.constant 0.000000e+00 : f32
                  scf.yield %201 : f32
                }
                %202 = arith.constant 0 : index
                %203 = arith.cmpi sge, %19, %202 : index
                %204 = arith.constant 2 : index
                %205 = arith.cmpi slt, %19, %204 : index
                %206 = arith.andi %203, %205 : i1
                %207 = arith.constant 0 : index
                %208 = arith.cmpi sge, %47, %207 : index
                %209 = arith.constant 16 : index
                %210 = arith.cmpi slt, %47, %209 : index
                %211 = arith.andi %208, %210 : i1
                %212 = arith.andi %206, %211 : i1
                %213 = scf.if %212 -> (f32) {
                  %214 = memref.load %x[%i1, %i2, %19, %47] : memref<1x1x2x16xf32>
                  scf.yield %214 : f32
                } else {
                  %215 = arith.constant 0.000000e+00 : f32
                  scf.yield %215 : f32
                }
                %216 = arith.constant 0 : index
                %217 = arith.cmpi sge, %25, %216 : index
                %218 = arith.constant 2 : index
                %219 = arith.cmpi slt, %25, %218 : index
                %220 = arith.andi %217, %219 : i1
                %221 = arith.constant 0 : index
                %222 = arith.cmpi sge, %29, %221 : index
                %223 = arith.constant 16 : index
                %224 = arith.cmpi slt, %29, %223 : index
                %225 = arith.andi %222, %224 : i1
                %226 = arith.andi %220, %225 : i1
                %227 = scf.if %226 -> (f32) {
                  %228 = memref.load %x[%i1, %i2, %25, %29] : memref<1x1x2x16xf32>
                  scf.yield %228 : f32
                } else {
                  %229 = arith.constant 0.000000e+00 : f32
                  scf.yield %229 : f32
                }
                %230 = arith.constant 0 : index
                %231 = arith.cmpi sge, %25, %230 : index
                %232 = arith.constant 2 : index
                %233 = arith.cmpi slt, %25, %232 : index
                %234 = arith.andi %231, %233 : i1
                %235 = arith.constant 0 : index
                %236 = arith.cmpi sge, %35, %235 : index
                %237 = arith.constant 16 : index
                %238 = arith.cmpi slt, %35, %237 : index
                %239 = arith.andi %236, %238 : i1
                %240 = arith.andi %234, %239 : i1
                %241 = scf.if %240 -> (f32) {
                  %242 = memref.load %x[%i1, %i2, %25, %35] : memref<1x1x2x16xf32>
                  scf.yield %242 : f32
                } else {
                  %243 = arith.constant 0.000000e+00 : f32
                  scf.yield %243 : f32
                }
                %244 = arith.constant 0 : index
                %245 = arith.cmpi sge, %25, %244 : index
                %246 = arith.constant 2 : index
                %247 = arith.cmpi slt, %25, %246 : index
                %248 = arith.andi %245, %247 : i1
                %249 = arith.constant 0 : index
                %250 = arith.cmpi sge, %41, %249 : index
                %251 = arith.constant 16 : index
                %252 = arith.cmpi slt, %41, %251 : index
                %253 = arith.andi %250, %252 : i1
                %254 = arith.andi %248, %253 : i1
                %255 = scf.if %254 -> (f32) {
                  %256 = memref.load %x[%i1, %i2, %25, %41] : memref<1x1x2x16xf32>
                  scf.yield %256 : f32
                } else {
                  %257 = arith.constant 0.000000e+00 : f32
                  scf.yield %257 : f32
                }
                %258 = arith.constant 0 : index
                %259 = arith.cmpi sge, %25, %258 : index
                %260 = arith.constant 2 : index
                %261 = arith.cmpi slt, %25, %260 : index
                %262 = arith.andi %259, %261 : i1
                %263 = arith.constant 0 : index
                %264 = arith.cmpi sge, %47, %263 : index
                %265 = arith.constant 16 : index
                %266 = arith.cmpi slt, %47, %265 : index
                %267 = arith.andi %264, %266 : i1
                %268 = arith.andi %262, %267 : i1
                %269 = scf.if %268 -> (f32) {
                  %270 = memref.load %x[%i1, %i2, %25, %47] : memref<1x1x2x16xf32>
                  scf.yield %270 : f32
                } else {
                  %271 = arith.constant 0.000000e+00 : f32
                  scf.yield %271 : f32
                }
                %272 = arith.constant 0 : index
                %273 = arith.cmpi eq, %3, %272 : index
                %274 = arith.subf %59, %87 : f32
                %275 = arith.constant 1 : index
                %276 = arith.cmpi eq, %3, %275 : index
                %277 = arith.addf %73, %87 : f32
                %278 = arith.constant 2 : index
                %279 = arith.cmpi eq, %3, %278 : index
                %280 = arith.subf %87, %73 : f32
                %281 = arith.subf %73, %101 : f32
                %282 = arith.select %279, %280, %281 : f32
                %283 = arith.select %276, %277, %282 : f32
                %284 = arith.select %273, %274, %283 : f32
                %285 = arith.constant 0 : index
                %286 = arith.cmpi eq, %3, %285 : index
                %287 = arith.subf %115, %143 : f32
                %288 = arith.constant 1 : index
                %289 = arith.cmpi eq, %3, %288 : index
                %290 = arith.addf %129, %143 : f32
                %291 = arith.constant 2 : index
                %292 = arith.cmpi eq, %3, %291 : index
                %293 = arith.subf %143, %129 : f32
                %294 = arith.subf %129, %157 : f32
                %295 = arith.select %292, %293, %294 : f32
                %296 = arith.select %289, %290, %295 : f32
                %297 = arith.select %286, %287, %296 : f32
                %298 = arith.constant 0 : index
                %299 = arith.cmpi eq, %3, %298 : index
                %300 = arith.subf %171, %199 : f32
                %301 = arith.constant 1 : index
                %302 = arith.cmpi eq, %3, %301 : index
                %303 = arith.addf %185, %199 : f32
                %304 = arith.constant 2 : index
                %305 = arith.cmpi eq, %3, %304 : index
                %306 = arith.subf %199, %185 : f32
                %307 = arith.subf %185, %213 : f32
                %308 = arith.select %305, %306, %307 : f32
                %309 = arith.select %302, %303, %308 : f32
                %310 = arith.select %299, %300, %309 : f32
                %311 = arith.constant 0 : index
                %312 = arith.cmpi eq, %3, %311 : index
                %313 = arith.subf %227, %255 : f32
                %314 = arith.constant 1 : index
                %315 = arith.cmpi eq, %3, %314 : index
                %316 = arith.addf %241, %255 : f32
                %317 = arith.constant 2 : index
                %318 = arith.cmpi eq, %3, %317 : index
                %319 = arith.subf %255, %241 : f32
                %320 = arith.subf %241, %269 : f32
                %321 = arith.select %318, %319, %320 : f32
                %322 = arith.select %315, %316, %321 : f32
                %323 = arith.select %312, %313, %322 : f32
                %324 = arith.constant 0 : index
                %325 = arith.cmpi eq, %1, %324 : index
                %326 = arith.subf %284, %310 : f32
                %327 = arith.constant 1 : index
                %328 = arith.cmpi eq, %1, %327 : index
                %329 = arith.addf %297, %310 : f32
                %330 = arith.constant 2 : index
                %331 = arith.cmpi eq, %1, %330 : index
                %332 = arith.subf %310, %297 : f32
                %333 = arith.subf %297, %323 : f32
                %334 = arith.select %331, %332, %333 : f32
                %335 = arith.select %328, %329, %334 : f32
                %336 = arith.select %325, %326, %335 : f32
                memref.store %336, %winograd_input_transform[%i0, %i1, %i2, %i3, %i4] : memref<16x1x1x1x8xf32>
              }
            }
          }
        }
      }
    }
    %reshape = memref.alloc() : memref<16x1x1x8xf32>
    loop.kernel "reshape_1" attributes {origin = "graph.reshape"} {
      loop.for %i0_1 = 0 to 16 step 1 {name = "i0", parallel} {
        loop.for %i1_1 = 0 to 1 step 1 {name = "i1"} {
          loop.for %i2_1 = 0 to 1 step 1 {name = "i2"} {
            loop.for %i3_1 = 0 to 8 step 1 {name = "i3", vectorize} {
              %337 = arith.constant 8 : index
              %338 = arith.muli %i0_1, %337 : index
              %339 = arith.addi %338, %i3_1 : index
              %340 = arith.constant 8 : index
              %341 = arith.divsi %339, %340 : index
              %342 = arith.constant 8 : index
              %343 = arith.remsi %339, %342 : index
              %344 = arith.constant 0 : index
              %345 = arith.constant 0 : index
              %346 = arith.constant 0 : index
              %347 = memref.load %winograd_input_transform[%341, %344, %345, %346, %343] : memref<16x1x1x1x8xf32>
              memref.store %347, %reshape[%i0_1, %i1_1, %i2_1, %i3_1] : memref<16x1x1x8xf32>
            }
          }
        }
      }
    }
    memref.dealloc %winograd_input_transform : memref<16x1x1x1x8xf32>
    %matmul = memref.alloc() : memref<16x1x8x8xf32>
    loop.kernel "matmul_2" attributes {origin = "graph.matmul"} {
      loop.for %i0_2 = 0 to 16 step 1 {name = "i0", parallel} {
        loop.for %i1_2 = 0 to 1 step 1 {name = "i1"} {
          loop.for %i2_2 = 0 to 8 step 1 {name = "i2"} {
            loop.for %i3_2 = 0 to 8 step 1 {name = "i3"} {
              %acc = memref.alloca() : memref<f32>
              %348 = arith.constant 0.000000e+00 : f32
              memref.store %348, %acc[] : memref<f32>
              loop.for %r0 = 0 to 1 step 1 {name = "r0", reduction} {
                %349 = memref.load %__constant[%i0_2, %i1_2, %i2_2, %r0] : memref<16x1x8x1xf32>
                %350 = memref.load %reshape[%i0_2, %i1_2, %r0, %i3_2] : memref<16x1x1x8xf32>
                %351 = arith.mulf %349, %350 : f32
                %352 = memref.load %acc[] : memref<f32>
                %353 = arith.addf %352, %351 : f32
                memref.store %353, %acc[] : memref<f32>
              }
              %sum = memref.load %acc[] : memref<f32>
              memref.store %sum, %matmul[%i0_2, %i1_2, %i2_2, %i3_2] : memref<16x1x8x8xf32>
            }
          }
        }
      }
    }
    memref.dealloc %reshape : memref<16x1x1x8xf32>
    %reshape_1 = memref.alloc() : memref<16x1x8x1x8xf32>
    loop.kernel "reshape_3" attributes {origin = "graph.reshape"} {
      loop.for %i0_3 = 0 to 16 step 1 {name = "i0", parallel} {
        loop.for %i1_3 = 0 to 1 step 1 {name = "i1"} {
          loop.for %i2_3 = 0 to 8 step 1 {name = "i2"} {
            loop.for %i3_3 = 0 to 1 step 1 {name = "i3"} {
              loop.for %i4_1 = 0 to 8 step 1 {name = "i4", vectorize} {
                %354 = arith.constant 8 : index
                %355 = arith.muli %i0_3, %354 : index
                %356 = arith.addi %355, %i2_3 : index
                %357 = arith.constant 8 : index
                %358 = arith.muli %356, %357 : index
                %359 = arith.addi %358, %i4_1 : index
                %360 = arith.constant 64 : index
                %361 = arith.divsi %359, %360 : index
                %362 = arith.constant 8 : index
                %363 = arith.divsi %359, %362 : index
                %364 = arith.constant 8 : index
                %365 = arith.remsi %363, %364 : index
                %366 = arith.constant 8 : index
                %367 = arith.remsi %359, %366 : index
                %368 = arith.constant 0 : index
                %369 = memref.load %matmul[%361, %368, %365, %367] : memref<16x1x8x8xf32>
                memref.store %369, %reshape_1[%i0_3, %i1_3, %i2_3, %i3_3, %i4_1] : memref<16x1x8x1x8xf32>
              }
            }
          }
        }
      }
    }
    memref.dealloc %matmul : memref<16x1x8x8xf32>
    loop.kernel "winograd_output_transform_relu_0" attributes {origin = "graph.fused(graph.winograd_output_transform, graph.relu)"} {
      loop.for %i0_4 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_4 = 0 to 8 step 1 {name = "i1", parallel} {
          loop.for %i2_4 = 0 to 2 step 1 {name = "i2"} {
            loop.for %i3_4 = 0 to 16 step 1 {name = "i3", vectorize} {
              %370 = arith.constant 2 : index
              %371 = arith.divsi %i2_4, %370 : index
              %372 = arith.constant 2 : index
              %373 = arith.remsi %i2_4, %372 : index
              %374 = arith.constant 2 : index
              %375 = arith.divsi %i3_4, %374 : index
              %376 = arith.constant 2 : index
              %377 = arith.remsi %i3_4, %376 : index
              %378 = arith.constant 4 : index
              %379 = arith.muli %373, %378 : index
              %380 = arith.addi %379, %377 : index
              %381 = memref.load %reshape_1[%380, %i0_4, %i1_4, %371, %375] : memref<16x1x8x1x8xf32>
              %382 = arith.constant 4 : index
              %383 = arith.muli %373, %382 : index
              %384 = arith.constant 1 : index
              %385 = arith.addi %377, %384 : index
              %386 = arith.addi %383, %385 : index
              %387 = memref.load %reshape_1[%386, %i0_4, %i1_4, %371, %375] : memref<16x1x8x1x8xf32>
              %388 = arith.constant 4 : index
              %389 = arith.muli %373, %388 : index
              %390 = arith.constant 2 : index
              %391 = arith.addi %377, %390 : index
              %392 = arith.addi %389, %391 : index
              %393 = memref.load %reshape_1[%392, %i0_4, %i1_4, %371, %375] : memref<16x1x8x1x8xf32>
              %394 = arith.addf %387, %393 : f32
              %395 = arith.constant 0 : index
              %396 = arith.cmpi eq, %377, %395 : index
              %397 = arith.addf %381, %394 : f32
              %398 = arith.subf %381, %394 : f32
              %399 = arith.select %396, %397, %398 : f32
              %400 = arith.constant 1 : index
              %401 = arith.addi %373, %400 : index
              %402 = arith.constant 4 : index
              %403 = arith.muli %401, %402 : index
              %404 = arith.addi %403, %377 : index
              %405 = memref.load %reshape_1[%404, %i0_4, %i1_4, %371, %375] : memref<16x1x8x1x8xf32>
              %406 = arith.constant 1 : index
              %407 = arith.addi %373, %406 : index
              %408 = arith.constant 4 : index
              %409 = arith.muli %407, %408 : index
              %410 = arith.constant 1 : index
              %411 = arith.addi %377, %410 : index
              %412 = arith.addi %409, %411 : index
              %413 = memref.load %reshape_1[%412, %i0_4, %i1_4, %371, %375] : memref<16x1x8x1x8xf32>
              %414 = arith.constant 1 : index
              %415 = arith.addi %373, %414 : index
              %416 = arith.constant 4 : index
              %417 = arith.muli %415, %416 : index
              %418 = arith.constant 2 : index
              %419 = arith.addi %377, %418 : index
              %420 = arith.addi %417, %419 : index
              %421 = memref.load %reshape_1[%420, %i0_4, %i1_4, %371, %375] : memref<16x1x8x1x8xf32>
              %422 = arith.addf %413, %421 : f32
              %423 = arith.constant 0 : index
              %424 = arith.cmpi eq, %377, %423 : index
              %425 = arith.addf %405, %422 : f32
              %426 = arith.subf %405, %422 : f32
              %427 = arith.select %424, %425, %426 : f32
              %428 = arith.constant 2 : index
              %429 = arith.addi %373, %428 : index
              %430 = arith.constant 4 : index
              %431 = arith.muli %429, %430 : index
              %432 = arith.addi %431, %377 : index
              %433 = memref.load %reshape_1[%432, %i0_4, %i1_4, %371, %375] : memref<16x1x8x1x8xf32>
              %434 = arith.constant 2 : index
              %435 = arith.addi %373, %434 : index
              %436 = arith.constant 4 : index
              %437 = arith.muli %435, %436 : index
              %438 = arith.constant 1 : index
              %439 = arith.addi %377, %438 : index
              %440 = arith.addi %437, %439 : index
              %441 = memref.load %reshape_1[%440, %i0_4, %i1_4, %371, %375] : memref<16x1x8x1x8xf32>
              %442 = arith.constant 2 : index
              %443 = arith.addi %373, %442 : index
              %444 = arith.constant 4 : index
              %445 = arith.muli %443, %444 : index
              %446 = arith.constant 2 : index
              %447 = arith.addi %377, %446 : index
              %448 = arith.addi %445, %447 : index
              %449 = memref.load %reshape_1[%448, %i0_4, %i1_4, %371, %375] : memref<16x1x8x1x8xf32>
              %450 = arith.addf %441, %449 : f32
              %451 = arith.constant 0 : index
              %452 = arith.cmpi eq, %377, %451 : index
              %453 = arith.addf %433, %450 : f32
              %454 = arith.subf %433, %450 : f32
              %455 = arith.select %452, %453, %454 : f32
              %456 = arith.addf %427, %455 : f32
              %457 = arith.constant 0 : index
              %458 = arith.cmpi eq, %373, %457 : index
              %459 = arith.addf %399, %456 : f32
              %460 = arith.subf %399, %456 : f32
              %461 = arith.select %458, %459, %460 : f32
              %462 = memref.load %b[%i1_4] : memref<8xf32>
              %463 = arith.addf %461, %462 : f32
              %464 = arith.constant 0.000000e+00 : f32
              %465 = arith.maximumf %463, %464 : f32
              memref.store %465, %out0[%i0_4, %i1_4, %i2_4, %i3_4] : memref<1x8x2x16xf32>
            }
          }
        }
      }
    }
    memref.dealloc %reshape_1 : memref<16x1x8x1x8xf32>
    func.return
  }
}

// -----

// 4 tile columns: no fused kernel. The input transform's point loop (16, outermost) is
// unrolled inside the loops (n, c, th, tw), channels parallel; the output transform's rows
// and columns tiled by two.
// CHECK-LABEL: func.func @main
// CHECK:         loop.kernel "winograd_input_transform_0" attributes {origin = "graph.winograd_input_transform", opencl_nests}
// CHECK-NEXT:      loop.for %{{.*}} = 0 to 1 step 1 {name = "i1"}
// CHECK-NEXT:        loop.for %{{.*}} = 0 to 1 step 1 {name = "i2", parallel}
// CHECK-NEXT:          loop.for %{{.*}} = 0 to 1 step 1 {name = "i3"}
// CHECK-NEXT:            loop.for %{{.*}} = 0 to 4 step 1 {name = "i4"}
// CHECK-NOT:               loop.for
// CHECK:         loop.kernel "reshape_1"
// CHECK:         loop.kernel "winograd_output_transform_relu_0" attributes {origin = "graph.fused(graph.winograd_output_transform, graph.relu)", opencl_nests}
// CHECK:           loop.for %{{.*}} {name = "i2t"}
// CHECK:             loop.for %{{.*}} {name = "i3t"}

builtin.module {
  "memref.global"() <{sym_name = "__constant_0", type = memref<16x1x8x1xf32>, initial_value = dense<5.000000e-01> : tensor<16x1x8x1xf32>, sym_visibility = "private", constant}> : () -> ()
  func.func @main(%x: memref<1x1x2x8xf32> {dlpc.name = "x"}, %b: memref<8xf32> {dlpc.name = "b"}, %out0: memref<1x8x2x8xf32>) attributes {dlpc.num_inputs = 1 : i64, dlpc.params = ["b"], dlpc.num_outputs = 1 : i64} {
    %__constant = memref.get_global @__constant_0 : memref<16x1x8x1xf32>
    %winograd_input_transform = memref.alloc() : memref<16x1x1x1x4xf32>
    loop.kernel "winograd_input_transform_0" attributes {origin = "graph.winograd_input_transform"} {
      loop.for %i0 = 0 to 16 step 1 {name = "i0", parallel} {
        loop.for %i1 = 0 to 1 step 1 {name = "i1"} {
          loop.for %i2 = 0 to 1 step 1 {name = "i2"} {
            loop.for %i3 = 0 to 1 step 1 {name = "i3"} {
              loop.for %i4 = 0 to 4 step 1 {name = "i4", vectorize} {
                %0 = arith.constant 4 : index
                %1 = arith.divsi %i0, %0 : index
                %2 = arith.constant 4 : index
                %3 = arith.remsi %i0, %2 : index
                %4 = arith.constant 2 : index
                %5 = arith.muli %i3, %4 : index
                %6 = arith.constant 1 : index
                %7 = arith.subi %5, %6 : index
                %8 = arith.constant 2 : index
                %9 = arith.muli %i3, %8 : index
                %10 = arith.constant 1 : index
                %11 = arith.addi %9, %10 : index
                %12 = arith.constant 1 : index
                %13 = arith.subi %11, %12 : index
                %14 = arith.constant 2 : index
                %15 = arith.muli %i3, %14 : index
                %16 = arith.constant 2 : index
                %17 = arith.addi %15, %16 : index
                %18 = arith.constant 1 : index
                %19 = arith.subi %17, %18 : index
                %20 = arith.constant 2 : index
                %21 = arith.muli %i3, %20 : index
                %22 = arith.constant 3 : index
                %23 = arith.addi %21, %22 : index
                %24 = arith.constant 1 : index
                %25 = arith.subi %23, %24 : index
                %26 = arith.constant 2 : index
                %27 = arith.muli %i4, %26 : index
                %28 = arith.constant 1 : index
                %29 = arith.subi %27, %28 : index
                %30 = arith.constant 2 : index
                %31 = arith.muli %i4, %30 : index
                %32 = arith.constant 1 : index
                %33 = arith.addi %31, %32 : index
                %34 = arith.constant 1 : index
                %35 = arith.subi %33, %34 : index
                %36 = arith.constant 2 : index
                %37 = arith.muli %i4, %36 : index
                %38 = arith.constant 2 : index
                %39 = arith.addi %37, %38 : index
                %40 = arith.constant 1 : index
                %41 = arith.subi %39, %40 : index
                %42 = arith.constant 2 : index
                %43 = arith.muli %i4, %42 : index
                %44 = arith.constant 3 : index
                %45 = arith.addi %43, %44 : index
                %46 = arith.constant 1 : index
                %47 = arith.subi %45, %46 : index
                %48 = arith.constant 0 : index
                %49 = arith.cmpi sge, %7, %48 : index
                %50 = arith.constant 2 : index
                %51 = arith.cmpi slt, %7, %50 : index
                %52 = arith.andi %49, %51 : i1
                %53 = arith.constant 0 : index
                %54 = arith.cmpi sge, %29, %53 : index
                %55 = arith.constant 8 : index
                %56 = arith.cmpi slt, %29, %55 : index
                %57 = arith.andi %54, %56 : i1
                %58 = arith.andi %52, %57 : i1
                %59 = scf.if %58 -> (f32) {
                  %60 = memref.load %x[%i1, %i2, %7, %29] : memref<1x1x2x8xf32>
                  scf.yield %60 : f32
                } else {
                  %61 = arith.constant 0.000000e+00 : f32
                  scf.yield %61 : f32
                }
                %62 = arith.constant 0 : index
                %63 = arith.cmpi sge, %7, %62 : index
                %64 = arith.constant 2 : index
                %65 = arith.cmpi slt, %7, %64 : index
                %66 = arith.andi %63, %65 : i1
                %67 = arith.constant 0 : index
                %68 = arith.cmpi sge, %35, %67 : index
                %69 = arith.constant 8 : index
                %70 = arith.cmpi slt, %35, %69 : index
                %71 = arith.andi %68, %70 : i1
                %72 = arith.andi %66, %71 : i1
                %73 = scf.if %72 -> (f32) {
                  %74 = memref.load %x[%i1, %i2, %7, %35] : memref<1x1x2x8xf32>
                  scf.yield %74 : f32
                } else {
                  %75 = arith.constant 0.000000e+00 : f32
                  scf.yield %75 : f32
                }
                %76 = arith.constant 0 : index
                %77 = arith.cmpi sge, %7, %76 : index
                %78 = arith.constant 2 : index
                %79 = arith.cmpi slt, %7, %78 : index
                %80 = arith.andi %77, %79 : i1
                %81 = arith.constant 0 : index
                %82 = arith.cmpi sge, %41, %81 : index
                %83 = arith.constant 8 : index
                %84 = arith.cmpi slt, %41, %83 : index
                %85 = arith.andi %82, %84 : i1
                %86 = arith.andi %80, %85 : i1
                %87 = scf.if %86 -> (f32) {
                  %88 = memref.load %x[%i1, %i2, %7, %41] : memref<1x1x2x8xf32>
                  scf.yield %88 : f32
                } else {
                  %89 = arith.constant 0.000000e+00 : f32
                  scf.yield %89 : f32
                }
                %90 = arith.constant 0 : index
                %91 = arith.cmpi sge, %7, %90 : index
                %92 = arith.constant 2 : index
                %93 = arith.cmpi slt, %7, %92 : index
                %94 = arith.andi %91, %93 : i1
                %95 = arith.constant 0 : index
                %96 = arith.cmpi sge, %47, %95 : index
                %97 = arith.constant 8 : index
                %98 = arith.cmpi slt, %47, %97 : index
                %99 = arith.andi %96, %98 : i1
                %100 = arith.andi %94, %99 : i1
                %101 = scf.if %100 -> (f32) {
                  %102 = memref.load %x[%i1, %i2, %7, %47] : memref<1x1x2x8xf32>
                  scf.yield %102 : f32
                } else {
                  %103 = arith.constant 0.000000e+00 : f32
                  scf.yield %103 : f32
                }
                %104 = arith.constant 0 : index
                %105 = arith.cmpi sge, %13, %104 : index
                %106 = arith.constant 2 : index
                %107 = arith.cmpi slt, %13, %106 : index
                %108 = arith.andi %105, %107 : i1
                %109 = arith.constant 0 : index
                %110 = arith.cmpi sge, %29, %109 : index
                %111 = arith.constant 8 : index
                %112 = arith.cmpi slt, %29, %111 : index
                %113 = arith.andi %110, %112 : i1
                %114 = arith.andi %108, %113 : i1
                %115 = scf.if %114 -> (f32) {
                  %116 = memref.load %x[%i1, %i2, %13, %29] : memref<1x1x2x8xf32>
                  scf.yield %116 : f32
                } else {
                  %117 = arith.constant 0.000000e+00 : f32
                  scf.yield %117 : f32
                }
                %118 = arith.constant 0 : index
                %119 = arith.cmpi sge, %13, %118 : index
                %120 = arith.constant 2 : index
                %121 = arith.cmpi slt, %13, %120 : index
                %122 = arith.andi %119, %121 : i1
                %123 = arith.constant 0 : index
                %124 = arith.cmpi sge, %35, %123 : index
                %125 = arith.constant 8 : index
                %126 = arith.cmpi slt, %35, %125 : index
                %127 = arith.andi %124, %126 : i1
                %128 = arith.andi %122, %127 : i1
                %129 = scf.if %128 -> (f32) {
                  %130 = memref.load %x[%i1, %i2, %13, %35] : memref<1x1x2x8xf32>
                  scf.yield %130 : f32
                } else {
                  %131 = arith.constant 0.000000e+00 : f32
                  scf.yield %131 : f32
                }
                %132 = arith.constant 0 : index
                %133 = arith.cmpi sge, %13, %132 : index
                %134 = arith.constant 2 : index
                %135 = arith.cmpi slt, %13, %134 : index
                %136 = arith.andi %133, %135 : i1
                %137 = arith.constant 0 : index
                %138 = arith.cmpi sge, %41, %137 : index
                %139 = arith.constant 8 : index
                %140 = arith.cmpi slt, %41, %139 : index
                %141 = arith.andi %138, %140 : i1
                %142 = arith.andi %136, %141 : i1
                %143 = scf.if %142 -> (f32) {
                  %144 = memref.load %x[%i1, %i2, %13, %41] : memref<1x1x2x8xf32>
                  scf.yield %144 : f32
                } else {
                  %145 = arith.constant 0.000000e+00 : f32
                  scf.yield %145 : f32
                }
                %146 = arith.constant 0 : index
                %147 = arith.cmpi sge, %13, %146 : index
                %148 = arith.constant 2 : index
                %149 = arith.cmpi slt, %13, %148 : index
                %150 = arith.andi %147, %149 : i1
                %151 = arith.constant 0 : index
                %152 = arith.cmpi sge, %47, %151 : index
                %153 = arith.constant 8 : index
                %154 = arith.cmpi slt, %47, %153 : index
                %155 = arith.andi %152, %154 : i1
                %156 = arith.andi %150, %155 : i1
                %157 = scf.if %156 -> (f32) {
                  %158 = memref.load %x[%i1, %i2, %13, %47] : memref<1x1x2x8xf32>
                  scf.yield %158 : f32
                } else {
                  %159 = arith.constant 0.000000e+00 : f32
                  scf.yield %159 : f32
                }
                %160 = arith.constant 0 : index
                %161 = arith.cmpi sge, %19, %160 : index
                %162 = arith.constant 2 : index
                %163 = arith.cmpi slt, %19, %162 : index
                %164 = arith.andi %161, %163 : i1
                %165 = arith.constant 0 : index
                %166 = arith.cmpi sge, %29, %165 : index
                %167 = arith.constant 8 : index
                %168 = arith.cmpi slt, %29, %167 : index
                %169 = arith.andi %166, %168 : i1
                %170 = arith.andi %164, %169 : i1
                %171 = scf.if %170 -> (f32) {
                  %172 = memref.load %x[%i1, %i2, %19, %29] : memref<1x1x2x8xf32>
                  scf.yield %172 : f32
                } else {
                  %173 = arith.constant 0.000000e+00 : f32
                  scf.yield %173 : f32
                }
                %174 = arith.constant 0 : index
                %175 = arith.cmpi sge, %19, %174 : index
                %176 = arith.constant 2 : index
                %177 = arith.cmpi slt, %19, %176 : index
                %178 = arith.andi %175, %177 : i1
                %179 = arith.constant 0 : index
                %180 = arith.cmpi sge, %35, %179 : index
                %181 = arith.constant 8 : index
                %182 = arith.cmpi slt, %35, %181 : index
                %183 = arith.andi %180, %182 : i1
                %184 = arith.andi %178, %183 : i1
                %185 = scf.if %184 -> (f32) {
                  %186 = memref.load %x[%i1, %i2, %19, %35] : memref<1x1x2x8xf32>
                  scf.yield %186 : f32
                } else {
                  %187 = arith.constant 0.000000e+00 : f32
                  scf.yield %187 : f32
                }
                %188 = arith.constant 0 : index
                %189 = arith.cmpi sge, %19, %188 : index
                %190 = arith.constant 2 : index
                %191 = arith.cmpi slt, %19, %190 : index
                %192 = arith.andi %189, %191 : i1
                %193 = arith.constant 0 : index
                %194 = arith.cmpi sge, %41, %193 : index
                %195 = arith.constant 8 : index
                %196 = arith.cmpi slt, %41, %195 : index
                %197 = arith.andi %194, %196 : i1
                %198 = arith.andi %192, %197 : i1
                %199 = scf.if %198 -> (f32) {
                  %200 = memref.load %x[%i1, %i2, %19, %41] : memref<1x1x2x8xf32>
                  scf.yield %200 : f32
                } else {
                  %201 = arith.constant 0.000000e+00 : f32
                  scf.yield %201 : f32
                }
                %202 = arith.constant 0 : index
                %203 = arith.cmpi sge, %19, %202 : index
                %204 = arith.constant 2 : index
                %205 = arith.cmpi slt, %19, %204 : index
                %206 = arith.andi %203, %205 : i1
                %207 = arith.constant 0 : index
                %208 = arith.cmpi sge, %47, %207 : index
                %209 = arith.constant 8 : index
                %210 = arith.cmpi slt, %47, %209 : index
                %211 = arith.andi %208, %210 : i1
                %212 = arith.andi %206, %211 : i1
                %213 = scf.if %212 -> (f32) {
                  %214 = memref.load %x[%i1, %i2, %19, %47] : memref<1x1x2x8xf32>
                  scf.yield %214 : f32
                } else {
                  %215 = arith.constant 0.000000e+00 : f32
                  scf.yield %215 : f32
                }
                %216 = arith.constant 0 : index
                %217 = arith.cmpi sge, %25, %216 : index
                %218 = arith.constant 2 : index
                %219 = arith.cmpi slt, %25, %218 : index
                %220 = arith.andi %217, %219 : i1
                %221 = arith.constant 0 : index
                %222 = arith.cmpi sge, %29, %221 : index
                %223 = arith.constant 8 : index
                %224 = arith.cmpi slt, %29, %223 : index
                %225 = arith.andi %222, %224 : i1
                %226 = arith.andi %220, %225 : i1
                %227 = scf.if %226 -> (f32) {
                  %228 = memref.load %x[%i1, %i2, %25, %29] : memref<1x1x2x8xf32>
                  scf.yield %228 : f32
                } else {
                  %229 = arith.constant 0.000000e+00 : f32
                  scf.yield %229 : f32
                }
                %230 = arith.constant 0 : index
                %231 = arith.cmpi sge, %25, %230 : index
                %232 = arith.constant 2 : index
                %233 = arith.cmpi slt, %25, %232 : index
                %234 = arith.andi %231, %233 : i1
                %235 = arith.constant 0 : index
                %236 = arith.cmpi sge, %35, %235 : index
                %237 = arith.constant 8 : index
                %238 = arith.cmpi slt, %35, %237 : index
                %239 = arith.andi %236, %238 : i1
                %240 = arith.andi %234, %239 : i1
                %241 = scf.if %240 -> (f32) {
                  %242 = memref.load %x[%i1, %i2, %25, %35] : memref<1x1x2x8xf32>
                  scf.yield %242 : f32
                } else {
                  %243 = arith.constant 0.000000e+00 : f32
                  scf.yield %243 : f32
                }
                %244 = arith.constant 0 : index
                %245 = arith.cmpi sge, %25, %244 : index
                %246 = arith.constant 2 : index
                %247 = arith.cmpi slt, %25, %246 : index
                %248 = arith.andi %245, %247 : i1
                %249 = arith.constant 0 : index
                %250 = arith.cmpi sge, %41, %249 : index
                %251 = arith.constant 8 : index
                %252 = arith.cmpi slt, %41, %251 : index
                %253 = arith.andi %250, %252 : i1
                %254 = arith.andi %248, %253 : i1
                %255 = scf.if %254 -> (f32) {
                  %256 = memref.load %x[%i1, %i2, %25, %41] : memref<1x1x2x8xf32>
                  scf.yield %256 : f32
                } else {
                  %257 = arith.constant 0.000000e+00 : f32
                  scf.yield %257 : f32
                }
                %258 = arith.constant 0 : index
                %259 = arith.cmpi sge, %25, %258 : index
                %260 = arith.constant 2 : index
                %261 = arith.cmpi slt, %25, %260 : index
                %262 = arith.andi %259, %261 : i1
                %263 = arith.constant 0 : index
                %264 = arith.cmpi sge, %47, %263 : index
                %265 = arith.constant 8 : index
                %266 = arith.cmpi slt, %47, %265 : index
                %267 = arith.andi %264, %266 : i1
                %268 = arith.andi %262, %267 : i1
                %269 = scf.if %268 -> (f32) {
                  %270 = memref.load %x[%i1, %i2, %25, %47] : memref<1x1x2x8xf32>
                  scf.yield %270 : f32
                } else {
                  %271 = arith.constant 0.000000e+00 : f32
                  scf.yield %271 : f32
                }
                %272 = arith.constant 0 : index
                %273 = arith.cmpi eq, %3, %272 : index
                %274 = arith.subf %59, %87 : f32
                %275 = arith.constant 1 : index
                %276 = arith.cmpi eq, %3, %275 : index
                %277 = arith.addf %73, %87 : f32
                %278 = arith.constant 2 : index
                %279 = arith.cmpi eq, %3, %278 : index
                %280 = arith.subf %87, %73 : f32
                %281 = arith.subf %73, %101 : f32
                %282 = arith.select %279, %280, %281 : f32
                %283 = arith.select %276, %277, %282 : f32
                %284 = arith.select %273, %274, %283 : f32
                %285 = arith.constant 0 : index
                %286 = arith.cmpi eq, %3, %285 : index
                %287 = arith.subf %115, %143 : f32
                %288 = arith.constant 1 : index
                %289 = arith.cmpi eq, %3, %288 : index
                %290 = arith.addf %129, %143 : f32
                %291 = arith.constant 2 : index
                %292 = arith.cmpi eq, %3, %291 : index
                %293 = arith.subf %143, %129 : f32
                %294 = arith.subf %129, %157 : f32
                %295 = arith.select %292, %293, %294 : f32
                %296 = arith.select %289, %290, %295 : f32
                %297 = arith.select %286, %287, %296 : f32
                %298 = arith.constant 0 : index
                %299 = arith.cmpi eq, %3, %298 : index
                %300 = arith.subf %171, %199 : f32
                %301 = arith.constant 1 : index
                %302 = arith.cmpi eq, %3, %301 : index
                %303 = arith.addf %185, %199 : f32
                %304 = arith.constant 2 : index
                %305 = arith.cmpi eq, %3, %304 : index
                %306 = arith.subf %199, %185 : f32
                %307 = arith.subf %185, %213 : f32
                %308 = arith.select %305, %306, %307 : f32
                %309 = arith.select %302, %303, %308 : f32
                %310 = arith.select %299, %300, %309 : f32
                %311 = arith.constant 0 : index
                %312 = arith.cmpi eq, %3, %311 : index
                %313 = arith.subf %227, %255 : f32
                %314 = arith.constant 1 : index
                %315 = arith.cmpi eq, %3, %314 : index
                %316 = arith.addf %241, %255 : f32
                %317 = arith.constant 2 : index
                %318 = arith.cmpi eq, %3, %317 : index
                %319 = arith.subf %255, %241 : f32
                %320 = arith.subf %241, %269 : f32
                %321 = arith.select %318, %319, %320 : f32
                %322 = arith.select %315, %316, %321 : f32
                %323 = arith.select %312, %313, %322 : f32
                %324 = arith.constant 0 : index
                %325 = arith.cmpi eq, %1, %324 : index
                %326 = arith.subf %284, %310 : f32
                %327 = arith.constant 1 : index
                %328 = arith.cmpi eq, %1, %327 : index
                %329 = arith.addf %297, %310 : f32
                %330 = arith.constant 2 : index
                %331 = arith.cmpi eq, %1, %330 : index
                %332 = arith.subf %310, %297 : f32
                %333 = arith.subf %297, %323 : f32
                %334 = arith.select %331, %332, %333 : f32
                %335 = arith.select %328, %329, %334 : f32
                %336 = arith.select %325, %326, %335 : f32
                memref.store %336, %winograd_input_transform[%i0, %i1, %i2, %i3, %i4] : memref<16x1x1x1x4xf32>
              }
            }
          }
        }
      }
    }
    %reshape = memref.alloc() : memref<16x1x1x4xf32>
    loop.kernel "reshape_1" attributes {origin = "graph.reshape"} {
      loop.for %i0_1 = 0 to 16 step 1 {name = "i0", parallel} {
        loop.for %i1_1 = 0 to 1 step 1 {name = "i1"} {
          loop.for %i2_1 = 0 to 1 step 1 {name = "i2"} {
            loop.for %i3_1 = 0 to 4 step 1 {name = "i3", vectorize} {
              %337 = arith.constant 4 : index
              %338 = arith.muli %i0_1, %337 : index
              %339 = arith.addi %338, %i3_1 : index
              %340 = arith.constant 4 : index
              %341 = arith.divsi %339, %340 : index
              %342 = arith.constant 4 : index
              %343 = arith.remsi %339, %342 : index
              %344 = arith.constant 0 : index
              %345 = arith.constant 0 : index
              %346 = arith.constant 0 : index
              %347 = memref.load %winograd_input_transform[%341, %344, %345, %346, %343] : memref<16x1x1x1x4xf32>
              memref.store %347, %reshape[%i0_1, %i1_1, %i2_1, %i3_1] : memref<16x1x1x4xf32>
            }
          }
        }
      }
    }
    memref.dealloc %winograd_input_transform : memref<16x1x1x1x4xf32>
    %matmul = memref.alloc() : memref<16x1x8x4xf32>
    loop.kernel "matmul_2" attributes {origin = "graph.matmul"} {
      loop.for %i0_2 = 0 to 16 step 1 {name = "i0", parallel} {
        loop.for %i1_2 = 0 to 1 step 1 {name = "i1"} {
          loop.for %i2_2 = 0 to 8 step 1 {name = "i2"} {
            loop.for %i3_2 = 0 to 4 step 1 {name = "i3"} {
              %acc = memref.alloca() : memref<f32>
              %348 = arith.constant 0.000000e+00 : f32
              memref.store %348, %acc[] : memref<f32>
              loop.for %r0 = 0 to 1 step 1 {name = "r0", reduction} {
                %349 = memref.load %__constant[%i0_2, %i1_2, %i2_2, %r0] : memref<16x1x8x1xf32>
                %350 = memref.load %reshape[%i0_2, %i1_2, %r0, %i3_2] : memref<16x1x1x4xf32>
                %351 = arith.mulf %349, %350 : f32
                %352 = memref.load %acc[] : memref<f32>
                %353 = arith.addf %352, %351 : f32
                memref.store %353, %acc[] : memref<f32>
              }
              %sum = memref.load %acc[] : memref<f32>
              memref.store %sum, %matmul[%i0_2, %i1_2, %i2_2, %i3_2] : memref<16x1x8x4xf32>
            }
          }
        }
      }
    }
    memref.dealloc %reshape : memref<16x1x1x4xf32>
    %reshape_1 = memref.alloc() : memref<16x1x8x1x4xf32>
    loop.kernel "reshape_3" attributes {origin = "graph.reshape"} {
      loop.for %i0_3 = 0 to 16 step 1 {name = "i0", parallel} {
        loop.for %i1_3 = 0 to 1 step 1 {name = "i1"} {
          loop.for %i2_3 = 0 to 8 step 1 {name = "i2"} {
            loop.for %i3_3 = 0 to 1 step 1 {name = "i3"} {
              loop.for %i4_1 = 0 to 4 step 1 {name = "i4", vectorize} {
                %354 = arith.constant 8 : index
                %355 = arith.muli %i0_3, %354 : index
                %356 = arith.addi %355, %i2_3 : index
                %357 = arith.constant 4 : index
                %358 = arith.muli %356, %357 : index
                %359 = arith.addi %358, %i4_1 : index
                %360 = arith.constant 32 : index
                %361 = arith.divsi %359, %360 : index
                %362 = arith.constant 4 : index
                %363 = arith.divsi %359, %362 : index
                %364 = arith.constant 8 : index
                %365 = arith.remsi %363, %364 : index
                %366 = arith.constant 4 : index
                %367 = arith.remsi %359, %366 : index
                %368 = arith.constant 0 : index
                %369 = memref.load %matmul[%361, %368, %365, %367] : memref<16x1x8x4xf32>
                memref.store %369, %reshape_1[%i0_3, %i1_3, %i2_3, %i3_3, %i4_1] : memref<16x1x8x1x4xf32>
              }
            }
          }
        }
      }
    }
    memref.dealloc %matmul : memref<16x1x8x4xf32>
    loop.kernel "winograd_output_transform_relu_0" attributes {origin = "graph.fused(graph.winograd_output_transform, graph.relu)"} {
      loop.for %i0_4 = 0 to 1 step 1 {name = "i0"} {
        loop.for %i1_4 = 0 to 8 step 1 {name = "i1", parallel} {
          loop.for %i2_4 = 0 to 2 step 1 {name = "i2"} {
            loop.for %i3_4 = 0 to 8 step 1 {name = "i3", vectorize} {
              %370 = arith.constant 2 : index
              %371 = arith.divsi %i2_4, %370 : index
              %372 = arith.constant 2 : index
              %373 = arith.remsi %i2_4, %372 : index
              %374 = arith.constant 2 : index
              %375 = arith.divsi %i3_4, %374 : index
              %376 = arith.constant 2 : index
              %377 = arith.remsi %i3_4, %376 : index
              %378 = arith.constant 4 : index
              %379 = arith.muli %373, %378 : index
              %380 = arith.addi %379, %377 : index
              %381 = memref.load %reshape_1[%380, %i0_4, %i1_4, %371, %375] : memref<16x1x8x1x4xf32>
              %382 = arith.constant 4 : index
              %383 = arith.muli %373, %382 : index
              %384 = arith.constant 1 : index
              %385 = arith.addi %377, %384 : index
              %386 = arith.addi %383, %385 : index
              %387 = memref.load %reshape_1[%386, %i0_4, %i1_4, %371, %375] : memref<16x1x8x1x4xf32>
              %388 = arith.constant 4 : index
              %389 = arith.muli %373, %388 : index
              %390 = arith.constant 2 : index
              %391 = arith.addi %377, %390 : index
              %392 = arith.addi %389, %391 : index
              %393 = memref.load %reshape_1[%392, %i0_4, %i1_4, %371, %375] : memref<16x1x8x1x4xf32>
              %394 = arith.addf %387, %393 : f32
              %395 = arith.constant 0 : index
              %396 = arith.cmpi eq, %377, %395 : index
              %397 = arith.addf %381, %394 : f32
              %398 = arith.subf %381, %394 : f32
              %399 = arith.select %396, %397, %398 : f32
              %400 = arith.constant 1 : index
              %401 = arith.addi %373, %400 : index
              %402 = arith.constant 4 : index
              %403 = arith.muli %401, %402 : index
              %404 = arith.addi %403, %377 : index
              %405 = memref.load %reshape_1[%404, %i0_4, %i1_4, %371, %375] : memref<16x1x8x1x4xf32>
              %406 = arith.constant 1 : index
              %407 = arith.addi %373, %406 : index
              %408 = arith.constant 4 : index
              %409 = arith.muli %407, %408 : index
              %410 = arith.constant 1 : index
              %411 = arith.addi %377, %410 : index
              %412 = arith.addi %409, %411 : index
              %413 = memref.load %reshape_1[%412, %i0_4, %i1_4, %371, %375] : memref<16x1x8x1x4xf32>
              %414 = arith.constant 1 : index
              %415 = arith.addi %373, %414 : index
              %416 = arith.constant 4 : index
              %417 = arith.muli %415, %416 : index
              %418 = arith.constant 2 : index
              %419 = arith.addi %377, %418 : index
              %420 = arith.addi %417, %419 : index
              %421 = memref.load %reshape_1[%420, %i0_4, %i1_4, %371, %375] : memref<16x1x8x1x4xf32>
              %422 = arith.addf %413, %421 : f32
              %423 = arith.constant 0 : index
              %424 = arith.cmpi eq, %377, %423 : index
              %425 = arith.addf %405, %422 : f32
              %426 = arith.subf %405, %422 : f32
              %427 = arith.select %424, %425, %426 : f32
              %428 = arith.constant 2 : index
              %429 = arith.addi %373, %428 : index
              %430 = arith.constant 4 : index
              %431 = arith.muli %429, %430 : index
              %432 = arith.addi %431, %377 : index
              %433 = memref.load %reshape_1[%432, %i0_4, %i1_4, %371, %375] : memref<16x1x8x1x4xf32>
              %434 = arith.constant 2 : index
              %435 = arith.addi %373, %434 : index
              %436 = arith.constant 4 : index
              %437 = arith.muli %435, %436 : index
              %438 = arith.constant 1 : index
              %439 = arith.addi %377, %438 : index
              %440 = arith.addi %437, %439 : index
              %441 = memref.load %reshape_1[%440, %i0_4, %i1_4, %371, %375] : memref<16x1x8x1x4xf32>
              %442 = arith.constant 2 : index
              %443 = arith.addi %373, %442 : index
              %444 = arith.constant 4 : index
              %445 = arith.muli %443, %444 : index
              %446 = arith.constant 2 : index
              %447 = arith.addi %377, %446 : index
              %448 = arith.addi %445, %447 : index
              %449 = memref.load %reshape_1[%448, %i0_4, %i1_4, %371, %375] : memref<16x1x8x1x4xf32>
              %450 = arith.addf %441, %449 : f32
              %451 = arith.constant 0 : index
              %452 = arith.cmpi eq, %377, %451 : index
              %453 = arith.addf %433, %450 : f32
              %454 = arith.subf %433, %450 : f32
              %455 = arith.select %452, %453, %454 : f32
              %456 = arith.addf %427, %455 : f32
              %457 = arith.constant 0 : index
              %458 = arith.cmpi eq, %373, %457 : index
              %459 = arith.addf %399, %456 : f32
              %460 = arith.subf %399, %456 : f32
              %461 = arith.select %458, %459, %460 : f32
              %462 = memref.load %b[%i1_4] : memref<8xf32>
              %463 = arith.addf %461, %462 : f32
              %464 = arith.constant 0.000000e+00 : f32
              %465 = arith.maximumf %463, %464 : f32
              memref.store %465, %out0[%i0_4, %i1_4, %i2_4, %i3_4] : memref<1x8x2x8xf32>
            }
          }
        }
      }
    }
    memref.dealloc %reshape_1 : memref<16x1x8x1x4xf32>
    func.return
  }
}
