// SPDX-License-Identifier: MIT
// view_layer.cpp, compiled by nvcc.
#include "view_layer.cpp"
