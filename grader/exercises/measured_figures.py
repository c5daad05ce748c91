"""Figures of the reference solutions, by card, written by `course-grader bench` (grader.exercises.reference_figures)."""

MEASURED = {'NVIDIA H200': {'exercises': {'day4.attention': {'baseline': 'F.scaled_dot_product_attention '
                                                              '(FLASH_ATTENTION backend)',
                                                  'rate': '469 TFLOP/s = 47% of the dense 16-bit peak',
                                                  'ratio': 1.329,
                                                  'usage': [{'kernel': 'attention_kernel',
                                                             'local_bytes': 0,
                                                             'num_warps': 4,
                                                             'registers': 180,
                                                             'shared': 114688}]},
                               'day4.transformer_block': {'baseline': 'the same block in eager PyTorch '
                                                                      "(cuBLAS, F.rms_norm, SDPA's default "
                                                                      'backend)',
                                                          'rate': '582 TFLOP/s = 59% of the dense 16-bit '
                                                                  'peak',
                                                          'ratio': 0.93,
                                                          'usage': [{'kernel': 'rmsnorm_kernel',
                                                                     'local_bytes': 0,
                                                                     'num_warps': 8,
                                                                     'registers': 26,
                                                                     'shared': 32},
                                                                    {'kernel': 'matmul_kernel',
                                                                     'local_bytes': 0,
                                                                     'num_warps': 8,
                                                                     'registers': 207,
                                                                     'shared': 147456},
                                                                    {'kernel': 'attention_kernel',
                                                                     'local_bytes': 0,
                                                                     'num_warps': 8,
                                                                     'registers': 118,
                                                                     'shared': 65536},
                                                                    {'kernel': 'swiglu_kernel',
                                                                     'local_bytes': 0,
                                                                     'num_warps': 4,
                                                                     'registers': 32,
                                                                     'shared': 0}]}},
                 'when': '2026-11-28, torch 2.11.0+cu130, triton 3.6.0'}}
