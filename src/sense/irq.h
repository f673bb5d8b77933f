/* PLACEHOLDER: replaced by the irq sampler. */
#pragma once

#include "sense/sample.h"
#include "sense/sampler.h"

extern const struct sampler irq_sampler;
