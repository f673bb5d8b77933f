/* PLACEHOLDER: replaced by the rapl sampler. */
#pragma once

#include "sense/sample.h"
#include "sense/sampler.h"

extern const struct sampler rapl_sampler;
